package turnframe_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/sqlitefile"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// eachStore runs f as one subtest per store implementation, each with a fresh
// store: the root package's tests prove the runtime, dispatcher and recovery
// over both stores without copying a test.
func eachStore(t *testing.T, f func(t *testing.T, store turnframe.Store)) {
	t.Helper()
	t.Run("memstore", func(t *testing.T) {
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		store, err := sqlitestore.Open(context.Background(), sqlitefile.Path(t))
		if err != nil {
			t.Fatalf("open sqlitestore: %v", err)
		}
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
}

// recorder is an Observer that keeps every signal it is given, in order,
// and hands the signals a test waits for to the channels notify returned.
type recorder struct {
	mu      sync.Mutex
	signals []recorded
	waiters map[turnframe.Signal]chan turnframe.Labels
}

type recorded struct {
	signal turnframe.Signal
	labels turnframe.Labels
}

func (r *recorder) Observe(s turnframe.Signal, l turnframe.Labels, _ time.Duration) {
	r.mu.Lock()
	r.signals = append(r.signals, recorded{s, l})
	ch := r.waiters[s]
	r.mu.Unlock()
	if ch != nil {
		ch <- l
	}
}

// notify returns a channel that receives the labels of every s observed
// from now on. It holds up to 1024 signals nobody read yet.
func (r *recorder) notify(s turnframe.Signal) <-chan turnframe.Labels {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiters == nil {
		r.waiters = make(map[turnframe.Signal]chan turnframe.Labels)
	}
	if r.waiters[s] == nil {
		r.waiters[s] = make(chan turnframe.Labels, 1024)
	}
	return r.waiters[s]
}

// labels returns the labels of every s observed, in order.
func (r *recorder) labels(s turnframe.Signal) []turnframe.Labels {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []turnframe.Labels
	for _, sig := range r.signals {
		if sig.signal == s {
			out = append(out, sig.labels)
		}
	}
	return out
}

// count returns how often s was observed.
func (r *recorder) count(s turnframe.Signal) int { return len(r.labels(s)) }

// awaitLabels blocks until ch (from recorder.notify) delivers a signal and
// returns its labels. The bound is a safety net for a signal that never
// comes, so the test fails instead of hanging; it is not a wait.
func awaitLabels(t *testing.T, ch <-chan turnframe.Labels, what string) turnframe.Labels {
	t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: never observed", what)
		return turnframe.Labels{}
	}
}

// stepClock is a clock a test moves by hand, safe to read from the
// goroutines late answers are recorded on.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock(at time.Time) *stepClock { return &stepClock{now: at} }

// read returns the clock's time: pass it to WithClock.
func (c *stepClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock to at.
func (c *stepClock) set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}

// histOf returns subject's audit trail, oldest first (at most 100 records).
func histOf(t *testing.T, store turnframe.Store, subject turnframe.Subject) []turnframe.HistoryRecord {
	t.Helper()
	records, err := store.History(context.Background(), subject, 0, 100)
	if err != nil {
		t.Fatalf("history of %v %s: %v", subject.Kind, subject.Ref, err)
	}
	return records
}

// histLine renders one record as "from>to actor code", or, for evidence,
// "evidence:status actor code".
func histLine(h turnframe.HistoryRecord) string {
	if h.Evidence {
		return strings.TrimSpace("evidence:" + h.To + " " + string(h.Actor) + " " + h.Code)
	}
	return strings.TrimSpace(h.From + ">" + h.To + " " + string(h.Actor) + " " + h.Code)
}

// histLines returns subject's audit trail, one histLine per record.
func histLines(t *testing.T, store turnframe.Store, subject turnframe.Subject) []string {
	t.Helper()
	var lines []string
	for _, h := range histOf(t, store, subject) {
		lines = append(lines, histLine(h))
	}
	return lines
}

// histLast returns the last line of subject's audit trail, or "" for none.
func histLast(t *testing.T, store turnframe.Store, subject turnframe.Subject) string {
	t.Helper()
	lines := histLines(t, store, subject)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// histLastMove returns the last move of subject's audit trail, leaving out
// evidence, which a late answer may append at any moment after the call
// that gave up on it returned; "" for none.
func histLastMove(t *testing.T, store turnframe.Store, subject turnframe.Subject) string {
	t.Helper()
	last := ""
	for _, h := range histOf(t, store, subject) {
		if !h.Evidence {
			last = histLine(h)
		}
	}
	return last
}

// policyFor returns what report's policy did with subject, and fails the
// test when the policy never met it.
func policyFor(t *testing.T, report turnframe.RecoverReport, subject turnframe.Subject) turnframe.PolicyResult {
	t.Helper()
	for _, p := range report.Policy {
		if p.Uncertain.Subject == subject {
			return p
		}
	}
	t.Fatalf("the policy never met %v %s", subject.Kind, subject.Ref)
	return turnframe.PolicyResult{}
}

// evidenceOf returns the evidence records of subject's audit trail that
// carry code, oldest first.
func evidenceOf(t *testing.T, store turnframe.Store, subject turnframe.Subject, code string) []turnframe.HistoryRecord {
	t.Helper()
	var out []turnframe.HistoryRecord
	for _, h := range histOf(t, store, subject) {
		if h.Evidence && h.Code == code {
			out = append(out, h)
		}
	}
	return out
}

// chargeFixture is a turn of rtAccount planned with one command, k-charge
// ("charge", no Remote declared), on a clock a test moves by hand, with a
// recording observer: the ground of the tests that count unknown outcomes.
type chargeFixture struct {
	ctx   context.Context
	clock *stepClock
	obs   *recorder
	opts  []turnframe.Option
	rt    *turnframe.Runtime
	turn  turnframe.TurnID
}

func newChargeFixture(t *testing.T, store turnframe.Store) chargeFixture {
	t.Helper()
	f := chargeFixture{ctx: context.Background(), clock: newStepClock(time.Now().UTC().Truncate(time.Microsecond)), obs: &recorder{}}
	f.opts = []turnframe.Option{turnframe.WithClock(f.clock.read), turnframe.WithObserver(f.obs),
		turnframe.WithCommand("charge", turnframe.Remote{}), turnframe.WithLogger(slog.New(slog.DiscardHandler))}
	f.rt = turnframe.New(store, f.opts...)
	f.turn = rtPlanned(t, f.rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
	return f
}

// takeAndDie has a new attempt take k-charge, after prior, under a lease of
// a minute, as a process that then dies mid-call, and returns the attempt.
func (f chargeFixture) takeAndDie(t *testing.T, store turnframe.Store, prior turnframe.AttemptID) turnframe.AttemptID {
	t.Helper()
	attempt := turnframe.NewIDGenerator().AttemptID(f.clock.read())
	_, err := store.Apply(f.ctx, turnframe.Write{Account: rtAccount, Turn: f.turn, Now: f.clock.read(),
		Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalExecuting, Attempt: attempt, Prior: prior, Lease: time.Minute}}})
	if err != nil {
		t.Fatalf("take k-charge: %v", err)
	}
	return attempt
}

// hookHandler is a slog.Handler that logs as text and calls hook with each
// record's message before it does.
type hookHandler struct {
	slog.Handler
	hook func(msg string)
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.hook(r.Message)
	return h.Handler.Handle(ctx, r)
}

// runOnceAsync runs d.RunOnce(ctx, now) on a goroutine and returns where
// its report comes; an error fails the test.
func runOnceAsync(t *testing.T, d *turnframe.Dispatcher, ctx context.Context, now time.Time) <-chan turnframe.DispatchReport {
	t.Helper()
	done := make(chan turnframe.DispatchReport, 1)
	go func() {
		report, err := d.RunOnce(ctx, now)
		if err != nil {
			t.Errorf("run once: %v", err)
		}
		done <- report
	}()
	return done
}

// otherRow returns the id of whichever of rows[0] and rows[1] is not id.
func otherRow(rows []turnframe.OutboxEntry, id turnframe.OutboxID) turnframe.OutboxID {
	if rows[0].ID == id {
		return rows[1].ID
	}
	return rows[0].ID
}
