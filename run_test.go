package turnframe_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// safetyNet bounds a wait for something that must happen, so a test fails
// instead of hanging. It is never a duration the test asserts.
const safetyNet = 10 * time.Second

// await blocks until ch is ready, failing the test at the safety net.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(safetyNet):
		t.Fatalf("%s: never happened", what)
		var zero T
		return zero
	}
}

// eventually yields until cond holds, failing the test at the safety net.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(safetyNet)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("%s: never happened", what)
		}
		runtime.Gosched()
	}
}

// memstoreFor returns a fresh memstore, closed when the test ends.
func memstoreFor(t *testing.T) *memstore.Store {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	return store
}

// runFrames name the functions of the goroutines Run starts.
var runFrames = []string{"turnframe.afterGrace", "turnframe.(*runLoop)", "turnframe.(*sweep)"}

// noneLeft fails the test if a goroutine Run started is still running: one
// that is ending as Run returns is waited for; one left behind never ends.
func noneLeft(t *testing.T) {
	t.Helper()
	left := func() string {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			for _, f := range runFrames {
				if strings.Contains(g, f) {
					return g
				}
			}
		}
		return ""
	}
	giveUp := time.Now().Add(safetyNet)
	for left() != "" && time.Now().Before(giveUp) {
		runtime.Gosched()
	}
	if g := left(); g != "" {
		t.Fatalf("a goroutine of Run outlived it:\n%s", g)
	}
}

// runDispatcher starts d.Run and returns a function that stops it and
// returns what it returned.
func runDispatcher(t *testing.T, d *turnframe.Dispatcher) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(cancel)
	return func() error {
		cancel()
		return await(t, done, "Run returns")
	}
}

// sendGate is a sender that reports each send's start on started and then
// blocks until proceed is closed (or its context ends), answering
// Completed.
type sendGate struct {
	started chan turnframe.OutboxEntry
	proceed chan struct{}
}

func newSendGate() *sendGate {
	return &sendGate{started: make(chan turnframe.OutboxEntry, 64), proceed: make(chan struct{})}
}

func (g *sendGate) Send(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	g.started <- e
	select {
	case <-g.proceed:
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	case <-ctx.Done():
		return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.cancelled"}
	}
}

// watchedStore reports its claims. Run claims once at its start, once when
// its first release ended, and then only when something wakes it: after
// two claims that found nothing it is idle. A claim here never waits for
// the release: a claim and the release's expiry are kept apart, so such a
// wait would hold both for good. notifyingStore makes it an
// EnqueueNotifier.
type watchedStore struct {
	turnframe.Store
	claims chan int // how many rows each ClaimDue returned
}

func watch(s turnframe.Store) *watchedStore {
	return &watchedStore{Store: s, claims: make(chan int, 1024)}
}

func (w *watchedStore) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	cs, err := w.Store.ClaimDue(ctx, now, limit, worker, lease)
	w.claims <- len(cs)
	return cs, err
}

// notifyingStore is a watchedStore that passes its store's Enqueued on.
type notifyingStore struct{ *watchedStore }

func (n notifyingStore) Enqueued() <-chan struct{} {
	return n.Store.(turnframe.EnqueueNotifier).Enqueued()
}

// runConfig is a config for Run that never polls within a test.
func runConfig() turnframe.DispatchConfig {
	cfg := turnframe.DefaultDispatchConfig("runner")
	cfg.PollInterval = time.Hour
	return cfg
}

// Closing the store wakes a Run that would otherwise sleep for an hour
// before it found out: Run is idle (two empty claims) when the store is
// closed, and returns ErrClosed without waiting for its next poll.
func TestRunReturnsAtOnceWhenItsIdleStoreIsClosed(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		w := watch(store)
		d := turnframe.NewDispatcher(notifyingStore{w}, newSendGate(), runConfig())
		ctx, cancel := context.WithTimeout(context.Background(), safetyNet) // a Run that does not stop fails, not hangs
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		is.Equal(await(t, w.claims, "the first claim"), 0)
		is.Equal(await(t, w.claims, "the claim after the release"), 0)
		is.NoErr(store.Close())
		is.True(errors.Is(<-ran, turnframe.ErrClosed)) // returned at once, not at the end of safetyNet
	})
}

// An enqueue in this process wakes a Run that would otherwise sleep for an
// hour: Run is idle (two empty claims: at start, and after its release)
// when the row is committed, and only the store's notification can make
// it claim again.
func TestRunWakesAtOnceWhenThisProcessEnqueues(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		w := watch(store)
		gate := newSendGate()
		close(gate.proceed)
		d := turnframe.NewDispatcher(notifyingStore{w}, gate, runConfig(), turnframe.WithClock(func() time.Time { return dispNow }))
		stop := runDispatcher(t, d)
		is.Equal(await(t, w.claims, "the first claim"), 0)  // nothing due at start
		is.Equal(await(t, w.claims, "the second claim"), 0) // nor after the release
		rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
		is.Equal(await(t, w.claims, "a claim after the enqueue"), 1) // woken by the commit
		is.Equal(await(t, gate.started, "the send").ID, rows[0].ID)  // and sent
		eventually(t, "the row is completed", func() bool { return dispGet(t, store, rows[0].ID).Status == turnframe.OutboxCompleted })
		is.NoErr(stop()) // Run returns nil when its context ends
	})
}

// A store that is not an EnqueueNotifier is polled.
func TestRunPollsAStoreThatDoesNotNotify(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	w := watch(store) // not a notifyingStore: Run cannot be woken
	gate := newSendGate()
	close(gate.proceed)
	cfg := runConfig()
	cfg.PollInterval = time.Millisecond
	d := turnframe.NewDispatcher(w, gate, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
	stop := runDispatcher(t, d)
	await(t, w.claims, "the first claim")
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	is.Equal(await(t, gate.started, "the send").ID, rows[0].ID) // found by a poll
	is.NoErr(stop())
}

// On shutdown Run claims nothing more, lets the send in flight finish
// within the grace period and settles it with its answer; its grace timer
// ends with it.
func TestRunSettlesTheSendsInFlightWithinTheGracePeriod(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(2, "payments", "")...)
	gate := newSendGate()
	cfg := runConfig()
	cfg.GracePeriod = time.Hour
	d := turnframe.NewDispatcher(store, gate, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	is.Equal(await(t, gate.started, "the first send").ID, rows[0].ID)
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a send was in flight within its grace period")
	default:
	}
	close(gate.proceed) // the send answers within the grace period
	is.NoErr(await(t, done, "Run returns"))
	first, second := dispGet(t, store, rows[0].ID), dispGet(t, store, rows[1].ID)
	is.Equal(first.Status, turnframe.OutboxCompleted) // settled with its answer
	is.Equal(second.Status, turnframe.OutboxPending)  // Run claims only what it has room to send
	is.Equal(second.Attempts, 0)                      // so the second was never claimed
	is.Equal(len(gate.started), 0)                    // nor sent
	noneLeft(t)                                       // and nothing Run started outlives it
}

// A send still unanswered when the grace period ends is outcome unknown,
// never a retry, even when the sender answers "retryable" to its cancelled
// context; and nothing Run started outlives it.
func TestRunSettlesASendUnansweredAfterTheGracePeriodAsUnknown(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	gate := newSendGate() // never proceeds: it answers retryable when its context ends
	cfg := runConfig()
	cfg.GracePeriod = time.Millisecond
	d := turnframe.NewDispatcher(store, gate, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	await(t, gate.started, "the send")
	cancel()
	is.NoErr(await(t, done, "Run returns"))
	row := dispGet(t, store, rows[0].ID)
	is.Equal(row.Status, turnframe.OutboxOutcomeUnknown) // unanswered in time: unknown
	is.Equal(row.LastCode, turnframe.CodeSendTimeout)    // by the deadline rule
	noneLeft(t)                                          // the sender's goroutine ends once it sees its context
}

// Run makes the outbox's part of Recover: a claim whose lease ended is
// expired, and the policy of its destination's Remote settles it — here a
// Verifier finds it happened, so it is completed and never sent again.
func TestRunExpiresEndedClaimsAndAppliesThePolicy(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	_, err := store.ClaimDue(context.Background(), dispNow, 1, "dead-worker", time.Second)
	is.NoErr(err) // a claim whose worker died
	verified := make(chan struct{}, 1)
	remote := turnframe.Remote{Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		verified <- struct{}{}
		return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "pay-1"}
	})}
	never := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		t.Error("a row the policy settled was sent")
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	later := func() time.Time { return dispNow.Add(time.Minute) } // the dead worker's lease has ended
	d := turnframe.NewDispatcher(store, never, runConfig(), turnframe.WithClock(later), turnframe.WithDestination("payments", remote))
	stop := runDispatcher(t, d)
	await(t, verified, "the lookup")
	eventually(t, "the row is completed", func() bool { return dispGet(t, store, rows[0].ID).Status == turnframe.OutboxCompleted })
	is.NoErr(stop())
	row := dispGet(t, store, rows[0].ID)
	is.Equal(row.LastCode, turnframe.CodeVerifiedHappened) // completed by the policy
	is.Equal(row.RemoteRef, "pay-1")                       // with the remote's reference
	is.Equal(row.Attempts, 1)                              // the dead worker's only
}

// Run returns an error wrapping ErrClosed when the store is closed.
func TestRunReturnsWhenTheStoreIsClosed(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	gate := newSendGate()
	cfg := runConfig()
	cfg.PollInterval = time.Millisecond
	d := turnframe.NewDispatcher(store, gate, cfg)
	is.NoErr(store.Close())
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet) // a Run that does not stop fails, not hangs
	defer cancel()
	err := d.Run(ctx)
	is.True(errors.Is(err, turnframe.ErrClosed)) // it cannot go on
}
