package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// process is what one application process holds: its own store handle,
// runtime, recovery and dispatcher over the shared file.
type process struct {
	name  string
	dead  *atomic.Bool // set when the process dies: its logger falls silent
	store *sqlitestore.Store
	rt    *turnframe.Runtime
	rec   *turnframe.Recovery
	disp  *turnframe.Dispatcher
	shop  *booking
}

func (d *demo) startProcess(ctx context.Context, name string, create bool) (*process, error) {
	var opts []sqlitestore.Option
	if !create {
		opts = append(opts, sqlitestore.WithExisting()) // a restarted process finds its file
	}
	store, err := sqlitestore.Open(ctx, d.path, opts...)
	if err != nil {
		return nil, err
	}
	// Every part runs on the demo's clock, logs into the narrative, counts
	// late answers and knows the same declarations of what each remote
	// can do.
	dead := new(atomic.Bool)
	common := slices.Concat([]turnframe.Option{turnframe.WithClock(d.clock.Now), turnframe.WithLogger(d.logger(dead)),
		turnframe.WithObserver(d.late.observer())}, d.remotes())
	return &process{
		name:  name,
		dead:  dead,
		store: store,
		// An attempt holds its command for the command timeout plus the
		// lease margin: a short one, so the demo's second process may
		// resume the command the first one died in, seconds later.
		rt: turnframe.New(store, slices.Concat(common, []turnframe.Option{
			turnframe.WithCommandTimeout(demoCommandTimeout), turnframe.WithLeaseMargin(demoLeaseMargin)})...),
		rec: turnframe.NewRecovery(store, common...),
		disp: turnframe.NewDispatcher(store, d.sender, turnframe.DispatchConfig{
			WorkerID:       name,
			SendTimeout:    d.opts.SendTimeout,
			InitialBackoff: time.Second,
			MaxAttempts:    5,
			LeaseMargin:    demoClaimMargin,
		}, common...),
		shop: newBooking(d.effects),
	}, nil
}

// playTurn receives e's message, plans and executes its command and, if
// deliver, answers.
func (d *demo) playTurn(ctx context.Context, p *process, conv turnframe.ConversationID, e *effect, deliver bool) error {
	d.clock.Advance(2 * time.Second)
	if err := d.receiveAndPlan(ctx, p, conv, e); err != nil {
		return err
	}
	rep, err := p.rt.Execute(ctx, demoAccount, e.turn, p.shop)
	if err != nil {
		return fmt.Errorf("turn %d: %w", e.n, err)
	}
	res := rep.Results[0]
	if res.Kind != turnframe.ResultCommitted || len(res.OutboxIDs) != 1 {
		return fmt.Errorf("turn %d: %s ended %v, not committed with one outbox row", e.n, e.command, res.Kind)
	}
	d.noteRow(e, res.OutboxIDs[0])
	d.say("turn %d  %s committed: its event and its %s outbox row %s in one transaction", e.n, e.command, e.dest, e.row)
	if !deliver {
		return nil
	}
	return d.deliver(ctx, p, e, res.EventIDs)
}

func (d *demo) receiveAndPlan(ctx context.Context, p *process, conv turnframe.ConversationID, e *effect) error {
	r, err := p.rt.ReceiveMessage(ctx, e.inbound(conv))
	if err != nil {
		return fmt.Errorf("turn %d: %w", e.n, err)
	}
	if r.Redelivered {
		return fmt.Errorf("turn %d: its first delivery was taken for a redelivery of turn %v", e.n, r.Turn)
	}
	turn := r.Turn
	e.turn, e.conv = turn, conv
	d.byTurn[turn] = e
	d.say("turn %d  user: %q", e.n, e.text)
	if _, err := p.rt.Plan(ctx, demoAccount, turn, e.plan(d.booking)); err != nil {
		return fmt.Errorf("turn %d: %w", e.n, err)
	}
	return nil
}

func (d *demo) noteRow(e *effect, id turnframe.OutboxID) {
	e.row = id
	d.byRow[id] = e
}

func (d *demo) deliver(ctx context.Context, p *process, e *effect, ids []turnframe.EventID) error {
	events, err := p.store.EventsByID(ctx, demoAccount, ids)
	if err != nil {
		return err
	}
	text := answer(events)
	if err := p.rt.Deliver(ctx, demoAccount, e.turn, text); err != nil {
		return fmt.Errorf("turn %d: %w", e.n, err)
	}
	d.say("turn %d  assistant: %q", e.n, text)
	return nil
}

// claimAndDie plays p's dispatcher at the moment p dies: it claims e's row
// as RunOnce does (ClaimDue under its worker id, leased for its
// Config().Lease()) and, unless e's trouble is diesBeforeSend, sends it
// through the same Sender — the remote acts on it — and the process dies
// before it records the answer, so the row stays dispatching in the file.
// RunOnce itself cannot be stopped between a send and its settlement
// without racing its own send timeout, so the demo makes the two calls
// RunOnce makes and stops between them. It returns when the claim's lease
// ends.
func (d *demo) claimAndDie(ctx context.Context, p *process, e *effect) (time.Time, error) {
	d.clock.Advance(time.Second)
	cfg := p.disp.Config()
	claims, err := p.store.ClaimDue(ctx, d.clock.Now(), 1, cfg.WorkerID, cfg.Lease())
	if err != nil {
		return time.Time{}, err
	}
	if len(claims) != 1 || claims[0].ID != e.row {
		return time.Time{}, fmt.Errorf("turn %d: %s's dispatcher was to claim the %s row alone, claimed %d row(s)", e.n, p.name, e.item, len(claims))
	}
	c := claims[0]
	if e.trouble == diesBeforeSend {
		d.say("turn %d  dispatch, meanwhile: %s claims the %s row (attempt %d, leased until t+%v); its request has not left yet",
			e.n, p.name, e.item, c.Attempts, d.since(c.LeaseUntil))
		return c.LeaseUntil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.SendTimeout)
	out := d.sender.Send(sctx, c.OutboxEntry)
	cancel()
	if out.Kind != turnframe.DispatchCompleted {
		return time.Time{}, fmt.Errorf("turn %d: the %s order was to reach the %s, got %v %s", e.n, e.item, e.dest, out.Kind, out.Code)
	}
	d.say("turn %d  dispatch, meanwhile: %s claims the %s row (attempt %d, leased until t+%v) and sends it: the %s takes the order, and its answer is on the way back",
		e.n, p.name, e.item, c.Attempts, d.since(c.LeaseUntil), e.dest)
	return c.LeaseUntil, nil
}

// crashMidExecution executes e's planned turn until its command runs, then
// kills the "process" under it: the context of Execute is cancelled while
// the handler is inside the command, so Execute returns with the journal
// entry still Executing, exactly as a crash leaves it. why says what else
// the process was doing as it died. It returns when the dead attempt's
// lease on the entry ends, and release, which lets the handler's goroutine
// return: a dead process's would never answer, so the caller releases it
// only once the process's store is closed.
func (d *demo) crashMidExecution(ctx context.Context, p *process, e *effect, why string) (time.Time, func(), error) {
	xctx, die := context.WithCancel(ctx)
	defer die()
	gone := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gone) }) }
	p.shop.mu.Lock()
	p.shop.crash = func(_ context.Context, call turnframe.Call) bool {
		if call.Command.Key != e.key {
			return false
		}
		die()  // the process dies while the command runs…
		<-gone // …and nothing it would have said is ever read
		return true
	}
	p.shop.mu.Unlock()
	_, err := p.rt.Execute(xctx, demoAccount, e.turn, p.shop)
	if err == nil || !errors.Is(err, context.Canceled) {
		release()
		return time.Time{}, nil, fmt.Errorf("turn %d: the execution was to be cut short, got %v", e.n, err)
	}
	entry, err := p.store.ByKey(ctx, demoAccount, e.key)
	if err != nil {
		release()
		return time.Time{}, nil, err
	}
	if entry.Status != turnframe.JournalExecuting || entry.LeaseUntil.IsZero() {
		release()
		return time.Time{}, nil, fmt.Errorf("turn %d: %s is %s after the crash, not executing under a lease", e.n, e.key, entry.Status)
	}
	d.say("turn %d  %s started (attempt %d, journal entry %s, leased until t+%v); %s dies mid-execution%s",
		e.n, e.command, entry.Attempts, entry.Status, d.since(entry.LeaseUntil), p.name, why)
	return entry.LeaseUntil, release, nil
}

// lateAnswers counts the answers the library recorded as late evidence
// (SignalLateAnswer), so the demo can wait for the late answer of a send
// that hung — it comes from the send's own goroutine, after RunOnce
// returned — and keep its narrative in order. Safe for concurrent use.
type lateAnswers struct {
	mu sync.Mutex
	n  int
	ch chan struct{} // a token whenever n grows
}

func newLateAnswers() *lateAnswers { return &lateAnswers{ch: make(chan struct{}, 1)} }

// observer returns the Observer that counts late answers.
func (l *lateAnswers) observer() turnframe.Observer {
	return turnframe.ObserverFunc(func(s turnframe.Signal, _ turnframe.Labels, _ time.Duration) {
		if s != turnframe.SignalLateAnswer {
			return
		}
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
		select {
		case l.ch <- struct{}{}:
		default:
		}
	})
}

func (l *lateAnswers) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// lateAnswerWait bounds the wait for a late answer in real time: a hung
// send's own answer comes as soon as its client gives up, at its deadline.
const lateAnswerWait = 30 * time.Second

// waitFor waits until n late answers were counted in all.
func (l *lateAnswers) waitFor(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, lateAnswerWait)
	defer cancel()
	for l.count() < n {
		select {
		case <-l.ch:
		case <-ctx.Done():
			return fmt.Errorf("the late answer of a send that hung never came: %w", ctx.Err())
		}
	}
	return nil
}

// demoClock is the demo's time: it moves only when the demo moves it, so a
// backoff is skipped over instead of slept through. Safe for concurrent use.
type demoClock struct {
	mu sync.Mutex
	t  time.Time
}

func newDemoClock() *demoClock {
	// It starts a few minutes in the past, so the simulated run ends before
	// the real now and the operator commands see its rows as past.
	return &demoClock{t: time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Second)}
}

// Now returns the demo's current time.
func (c *demoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d forward.
func (c *demoClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// AdvanceTo moves the clock to t, if t is later.
func (c *demoClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}
