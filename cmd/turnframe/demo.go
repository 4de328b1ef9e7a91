package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "play a booking conversation against a misbehaving payments server",
		help: `Plays a five-turn booking conversation through turnframe, over a fresh SQLite
file and a real HTTP payments server on 127.0.0.1 that keeps a ledger by
Idempotency-Key and misbehaves on purpose: it refuses a connection once,
answers 503 once, accepts a charge and then hangs past the send timeout, and
answers 400 once. One process "crashes" after a commit and before its answer,
and again in the middle of a command; a second process recovers the turns
from the file, dispatches the outbox until nothing is due (the clock jumps
over backoffs: nothing sleeps), reconciles the unknown charge against the
ledger and requeues the refused one.

It ends with a table of every intended charge: the ledger's count, the final
state of its outbox row and of its turn. The exit status is 0 only if every
charge landed exactly once; otherwise it is 1 and the discrepancy is named.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := fs.String("db", "", "write the demo database to `file`, which must not exist (default: a new temporary folder)")
			seed := fs.Int64("seed", 0, "`seed` choosing which charge meets which misbehaviour (0: from the clock)")
			timeout := fs.Duration("send-timeout", 200*time.Millisecond, "how long a send waits for the payments server")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("unexpected argument %q", args[0])
				}
				if *timeout <= 0 {
					return usagef("--send-timeout must be positive")
				}
				return runDemo(ctx, e.stdout, demoOptions{DBPath: *db, Seed: *seed, SendTimeout: *timeout})
			}
		},
	}
}

// The demo runtime's command timeout and lease margin: an attempt holds
// its command for 15 s of the demo's clock.
const (
	demoCommandTimeout = 10 * time.Second
	demoLeaseMargin    = 5 * time.Second
)

// demoOptions configure runDemo; zero fields take their defaults.
type demoOptions struct {
	DBPath      string        // the database to write; "" for a new temporary folder
	Seed        int64         // chooses which charge meets which misbehaviour; 0 from the clock
	SendTimeout time.Duration // how long a send waits; 0 for 200ms
}

// runDemo plays the demo, writing its narrative and summary to w. It returns
// nil only if every intended charge landed exactly once; a discrepancy is an
// error naming it.
func runDemo(ctx context.Context, w io.Writer, opts demoOptions) error {
	if opts.Seed == 0 {
		opts.Seed = time.Now().UnixNano()%1_000_000 + 1
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 200 * time.Millisecond
	}
	path, err := demoPath(opts.DBPath)
	if err != nil {
		return err
	}
	d := &demo{
		w:       &lockedWriter{w: w},
		opts:    opts,
		path:    path,
		clock:   newDemoClock(),
		effects: bookingScript(),
		byTurn:  make(map[turnframe.TurnID]*effect),
		byRow:   make(map[turnframe.OutboxID]*effect),
		booking: "booking/friday-8pm",
	}
	d.start = d.clock.Now()
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 0x7475726e6672616d))
	script := make(map[string]misbehaviour)
	perm := rng.Perm(len(d.effects))
	for _, e := range d.effects {
		e.key = turnframe.IdempotencyKey("booking-friday/" + strings.ReplaceAll(e.item, " ", "-"))
	}
	for i, m := range []misbehaviour{refuseConnection, answer503, acceptThenHang, answer400} {
		e := d.effects[perm[i]]
		e.trouble = m
		script[e.remoteKey()] = m
	}
	d.server, err = newPaymentsServer(script)
	if err != nil {
		return err
	}
	defer d.server.Close()
	if d.sender, err = d.server.sender(); err != nil {
		return err
	}
	return d.play(ctx)
}

// demoPath returns where the demo writes its database: path, which must not
// exist yet, or a file in a new temporary folder.
func demoPath(path string) (string, error) {
	if path == "" {
		dir, err := os.MkdirTemp("", "turnframe-demo-")
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "demo.db"), nil
	}
	if _, err := os.Stat(path); err == nil {
		return "", usagef("%s exists: the demo writes a fresh database; name a new file", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return path, nil
}

// demo is one run of the demo.
type demo struct {
	w       io.Writer
	opts    demoOptions
	path    string
	clock   *demoClock
	start   time.Time
	server  *paymentsServer
	sender  turnframe.Sender
	effects []*effect
	byTurn  map[turnframe.TurnID]*effect
	byRow   map[turnframe.OutboxID]*effect
	booking turnframe.CaseKey
}

// process is what one application process holds: its own store handle,
// runtime, recovery and dispatcher over the shared file.
type process struct {
	name  string
	store *sqlitestore.Store
	rt    *turnframe.Runtime
	rec   *turnframe.Recovery
	disp  *turnframe.Dispatcher
	shop  *booking
}

// lockedWriter serialises writes: the library's log lines (logger) may
// come from another goroutine than the narrative.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logger is the logger of the demo's runtimes, recoveries and dispatchers:
// the library's warnings and errors (an unknown outcome, a late answer),
// written into the narrative where they happen rather than to stderr.
func (d *demo) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(narrativeLog{d}, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the narrative stamps the demo's own time
			}
			return a
		},
	}))
}

// narrativeLog writes each log record as one line of the narrative.
type narrativeLog struct{ d *demo }

func (n narrativeLog) Write(p []byte) (int, error) {
	n.d.say("  log: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// say writes one line of the narrative, stamped with the demo's clock.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.w, "%-8s %s\n", "t+"+d.clock.Now().Sub(d.start).Round(time.Second).String(), fmt.Sprintf(format, args...))
}

func (d *demo) play(ctx context.Context) error {
	fmt.Fprintf(d.w, "turnframe demo (seed %d): five charges that must each land exactly once\n", d.opts.Seed)
	fmt.Fprintf(d.w, "database: %s\n", d.path)
	fmt.Fprintf(d.w, "payments: %s (ledger keyed by Idempotency-Key; send timeout %v)\n", d.server.URL(), d.opts.SendTimeout)
	for _, e := range d.effects {
		if e.trouble != behaveWell {
			fmt.Fprintf(d.w, "  the %s charge will meet: %s\n", e.item, e.trouble)
		}
	}
	fmt.Fprintln(d.w)

	p1, err := d.startProcess(ctx, "process-1", true)
	if err != nil {
		return err
	}
	defer p1.store.Close()
	d.say("process-1 starts: store, runtime, recovery, dispatcher")
	conv := p1.rt.NewConversationID()
	for _, e := range d.effects[:3] {
		if err := d.playTurn(ctx, p1, conv, e, true); err != nil {
			return err
		}
	}
	if _, err := d.sweep(ctx, p1); err != nil {
		return err
	}
	if err := d.playTurn(ctx, p1, conv, d.effects[3], false); err != nil {
		return err
	}
	d.say("turn %d  process-1 dies after the commit, before delivering the answer", d.effects[3].n)
	leaseUntil, err := d.crashMidExecution(ctx, p1, conv, d.effects[4])
	if err != nil {
		return err
	}
	d.say("process-1 is gone: its runtime, recovery and dispatcher are abandoned")
	p1.store.Close()

	// The dead attempt holds its command until its lease ends: until then
	// another process must take it for still running, not resume it.
	d.clock.AdvanceTo(leaseUntil.Add(time.Second))
	d.say("turn %d  the dead attempt's lease on %s ended at t+%v: the command may be resumed",
		d.effects[4].n, d.effects[4].command, leaseUntil.Sub(d.start).Round(time.Second))
	p2, err := d.startProcess(ctx, "process-2", false)
	if err != nil {
		return err
	}
	defer p2.store.Close()
	d.say("process-2 starts over the same file: new store, runtime, recovery, dispatcher")
	if err := d.recoverTurns(ctx, p2); err != nil {
		return err
	}
	if err := d.settleOutbox(ctx, p2); err != nil {
		return err
	}
	fmt.Fprintln(d.w)
	return d.summary(ctx, p2)
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
	return &process{
		name:  name,
		store: store,
		// An attempt holds its command for the command timeout plus the
		// lease margin: a short one, so the demo's second process may
		// resume the command the first one died in, seconds later.
		rt: turnframe.New(store, turnframe.WithClock(d.clock.Now), turnframe.WithLogger(d.logger()),
			turnframe.WithCommandTimeout(demoCommandTimeout), turnframe.WithLeaseMargin(demoLeaseMargin)),
		rec: turnframe.NewRecovery(store, turnframe.WithLogger(d.logger())),
		disp: turnframe.NewDispatcher(store, d.sender, turnframe.DispatchConfig{
			WorkerID:       name,
			SendTimeout:    d.opts.SendTimeout,
			InitialBackoff: time.Second,
			MaxAttempts:    5,
		}, turnframe.WithLogger(d.logger())),
		shop: newBooking(),
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
	d.say("turn %d  %s committed: its event and outbox row %s in one transaction", e.n, e.command, e.row)
	if !deliver {
		return nil
	}
	return d.deliver(ctx, p, e, res.EventIDs)
}

func (d *demo) receiveAndPlan(ctx context.Context, p *process, conv turnframe.ConversationID, e *effect) error {
	turn, err := p.rt.Receive(ctx, demoAccount, conv, e.text)
	if err != nil {
		return fmt.Errorf("turn %d: %w", e.n, err)
	}
	e.turn = turn
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

// crashMidExecution plays e's turn until its command runs, then kills the
// "process" under it: the context of Execute is cancelled while the handler
// is inside the command, so Execute returns with the journal entry still
// Executing, exactly as a crash leaves it. It returns when the dead
// attempt's lease on the entry ends.
func (d *demo) crashMidExecution(ctx context.Context, p *process, conv turnframe.ConversationID, e *effect) (time.Time, error) {
	d.clock.Advance(2 * time.Second)
	if err := d.receiveAndPlan(ctx, p, conv, e); err != nil {
		return time.Time{}, err
	}
	xctx, die := context.WithCancel(ctx)
	defer die()
	gone := make(chan struct{})
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
	close(gone)
	if err == nil || !errors.Is(err, context.Canceled) {
		return time.Time{}, fmt.Errorf("turn %d: the execution was to be cut short, got %v", e.n, err)
	}
	entry, err := p.store.ByKey(ctx, demoAccount, e.key)
	if err != nil {
		return time.Time{}, err
	}
	if entry.Status != turnframe.JournalExecuting || entry.LeaseUntil.IsZero() {
		return time.Time{}, fmt.Errorf("turn %d: %s is %s after the crash, not executing under a lease", e.n, e.key, entry.Status)
	}
	d.say("turn %d  %s started (attempt %d, journal entry %s, leased until t+%v); process-1 dies mid-execution",
		e.n, e.command, entry.Attempts, entry.Status, entry.LeaseUntil.Sub(d.start).Round(time.Second))
	return entry.LeaseUntil, nil
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
