package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// listeningStore is a watchedStore that is an EnqueueListener (and not an
// EnqueueNotifier) whose wake-ups the test makes: each ListenEnqueued hands
// the test its wake channel on started; failing it closes the channel, as
// a lost connection does; stopped counts the stops that returned.
type listeningStore struct {
	*watchedStore
	started chan chan struct{}
	mu      sync.Mutex
	stopped int
}

func (s *listeningStore) ListenEnqueued(ctx context.Context) (<-chan struct{}, func() error, error) {
	wake := make(chan struct{}, 1)
	var once sync.Once
	stop := func() error {
		once.Do(func() {
			s.mu.Lock()
			s.stopped++
			s.mu.Unlock()
		})
		return nil
	}
	s.started <- wake
	return wake, stop, nil
}

// idle waits for the three claims a Run makes before it waits for
// anything: at its start, once its listen answered (it listens on a
// goroutine of its own, and what was committed before it listened is
// never announced) and once its first release ended — the last two in
// either order — and checks that each found nothing due.
func idle(t *testing.T, l *listeningStore) {
	t.Helper()
	is := is.New(t)
	for _, which := range []string{"at start", "the second", "the third"} {
		is.Equal(await(t, l.claims, "the claim "+which), 0) // nothing due
	}
}

func (s *listeningStore) stops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Run listens from its start, claims when its listener hears an enqueue
// (the poll is an hour away and the store notifies nothing else), and has
// stopped its listener when it returns.
func TestRunWakesWhenItsListenerHears(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	l := &listeningStore{watchedStore: watch(store), started: make(chan chan struct{}, 4)}
	gate := newSendGate()
	close(gate.proceed)
	d := turnframe.NewDispatcher(l, gate, runConfig(), turnframe.WithClock(func() time.Time { return dispNow }))
	stop := runDispatcher(t, d)
	wake := await(t, l.started, "Run listens")
	idle(t, l) // nothing due at start, once listening, nor after the release
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	wake <- struct{}{}
	is.Equal(await(t, l.claims, "a claim after the wake-up"), 1) // woken by the listener
	is.Equal(await(t, gate.started, "the send").ID, rows[0].ID)  // and sent
	is.Equal(l.stops(), 0)                                       // listening while Run runs
	is.NoErr(stop())                                             // Run returns
	is.Equal(l.stops(), 1)                                       // having stopped its listener
	noneLeft(t)
}

// A listener that fails does not end Run: Run listens again (after its
// backoff) and claims once more then, since nothing replays what was
// committed while nobody listened.
func TestRunListensAgainWhenItsListenerFails(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	l := &listeningStore{watchedStore: watch(store), started: make(chan chan struct{}, 4)}
	gate := newSendGate()
	close(gate.proceed)
	d := turnframe.NewDispatcher(l, gate, runConfig(), turnframe.WithClock(func() time.Time { return dispNow }))
	stop := runDispatcher(t, d)
	wake := await(t, l.started, "Run listens")
	idle(t, l) // nothing due at start, once listening, nor after the release
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	close(wake) // the listener failed: the enqueue was never heard
	await(t, l.started, "Run listens again")
	is.Equal(await(t, gate.started, "the send").ID, rows[0].ID) // found by the claim after listening again
	is.Equal(l.stops(), 1)                                      // the failed listener was stopped
	is.NoErr(stop())                                            // Run ends cleanly
	is.Equal(l.stops(), 2)                                      // and stops the second listener
	noneLeft(t)
}
