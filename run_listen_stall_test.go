package turnframe_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// flappingListener is an EnqueueListener whose every listen starts and
// is lost at once (a connection the server or a proxy cuts as soon as it
// idles): ListenEnqueued succeeds, and its wake is already closed.
type flappingListener struct {
	turnframe.Store
	starts chan struct{}
}

func (s *flappingListener) ListenEnqueued(context.Context) (<-chan struct{}, func() error, error) {
	wake := make(chan struct{})
	close(wake)
	s.starts <- struct{}{}
	return wake, func() error { return nil }, nil
}

// retryInLog hands Run's "not listening" warnings' retry_in to waits.
type retryInLog struct{ waits chan time.Duration }

func (h retryInLog) Enabled(context.Context, slog.Level) bool { return true }
func (h retryInLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "retry_in" {
			select {
			case h.waits <- a.Value.Duration():
			default:
			}
		}
		return true
	})
	return nil
}
func (h retryInLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retryInLog) WithGroup(string) slog.Handler      { return h }

// DESIGN.md, Run: "A listener that fails closes its channel: Run logs a
// warning, falls back to the notifier and the poll, and listens again after
// a backoff (1 s, doubling up to a minute)". A listener lost right after
// each start never backs off: every successful start resets the backoff to
// a second, so Run opens a new connection (and logs a warning) every second
// for ever, however long the failure lasts. The waits Run announces are read
// from its own log; nothing is timed.
func TestRunBacksOffAListenerThatIsLostAsSoonAsItStarts(t *testing.T) {
	is := is.New(t)
	store := &flappingListener{Store: memstoreFor(t), starts: make(chan struct{}, 16)}
	log := retryInLog{waits: make(chan time.Duration, 16)}
	d := turnframe.NewDispatcher(store, newSendGate(), runConfig(),
		turnframe.WithClock(func() time.Time { return dispNow }), turnframe.WithLogger(slog.New(log)))
	stop := runDispatcher(t, d)
	var waits []time.Duration
	for range 3 {
		await(t, store.starts, "Run listens")
		waits = append(waits, await(t, log.waits, "Run says when it listens again"))
	}
	is.NoErr(stop())
	is.Equal(waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) // doubling, as for a listener that cannot start
}

// stallingListener is a memstore (an EnqueueNotifier) that is an
// EnqueueListener whose listens after the first `good` ones stall: they
// wait, as a connect to a server that does not answer does, until their
// context ends. stalled reports each stalled listen.
type stallingListener struct {
	*memstore.Store
	good    int
	mu      sync.Mutex
	calls   int
	wakes   chan chan struct{}
	stalled chan struct{}
}

func (s *stallingListener) ListenEnqueued(ctx context.Context) (<-chan struct{}, func() error, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n > s.good {
		s.stalled <- struct{}{}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	wake := make(chan struct{}, 1)
	s.wakes <- wake
	return wake, func() error { return nil }, nil
}

// DESIGN.md, Run: a listener that fails makes Run fall back "to the
// notifier and the poll" while it listens again after a backoff; Run's doc:
// it looks for due rows at once when this process enqueues (a notifier)
// and every PollInterval. But Run starts listening on its loop's
// goroutine, and a listen that does not return — pgstore's ListenEnqueued
// connects under Run's own context, with no deadline of its own, so a
// server or proxy that accepts and never answers, or drops the SYN, holds
// it — holds the whole loop: nothing is claimed, the notifier and the poll
// are not heard, finished batches free no room, releases stop. A row due
// the whole time is never sent.
func TestRunDispatchesWhileAListenIsStalled(t *testing.T) {
	for _, tc := range []struct {
		name string
		good int // listens that start before they stall
	}{
		{"AtStart", 0},
		{"WhenListeningAgain", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			store := &stallingListener{Store: memstoreFor(t), good: tc.good,
				wakes: make(chan chan struct{}, 4), stalled: make(chan struct{}, 4)}
			gate := newSendGate()
			close(gate.proceed)
			d := turnframe.NewDispatcher(store, gate, runConfig(), turnframe.WithClock(func() time.Time { return dispNow }))
			if tc.good == 0 {
				dispEnqueue(t, store, "acme", "k0", dispMessages(1, "payments", "")...) // due before Run starts
			}
			stop := runDispatcher(t, d)
			if tc.good > 0 {
				close(await(t, store.wakes, "Run listens")) // the listener is lost
			}
			await(t, store.stalled, "Run listens (again), and the listen stalls")
			if tc.good > 0 {
				dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...) // the notifier says so
			}
			await(t, gate.started, "the due row sent while the listen stalls")
			is.NoErr(stop())
		})
	}
}
