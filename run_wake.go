package turnframe

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Backoff of Run's attempts to listen again after its EnqueueListener
// failed: the first after listenRetryFirst, each next one twice as late, at
// most listenRetryMax.
const (
	listenRetryFirst = time.Second
	listenRetryMax   = time.Minute
)

// runWake is where one Run hears of enqueues: its store's EnqueueListener
// while it listens; otherwise its EnqueueNotifier, if any; and the poll
// always. Only the loop's goroutine touches it.
type runWake struct {
	d       *Dispatcher
	store   EnqueueListener // nil: the store is not one
	heard   <-chan struct{} // the listener's wake while it listens; else nil
	stop    func() error    // ends the listener while it listens
	since   time.Time       // when the listener started listening
	retry   *time.Timer     // when to listen again after a failure; nil if none is due
	backoff time.Duration   // the wait before the next retry

	started  chan listenResult  // the listen in progress answers here; nil when none runs
	cancel   context.CancelFunc // ends the listen in progress, and its listener
	starting sync.WaitGroup     // the listen in progress
}

// listenResult is what one ListenEnqueued answered.
type listenResult struct {
	heard <-chan struct{}
	stop  func() error
	err   error
}

func newRunWake(d *Dispatcher) *runWake {
	w := &runWake{d: d, backoff: listenRetryFirst}
	w.store, _ = d.store.(EnqueueListener)
	return w
}

// listen starts listening, if the store is an EnqueueListener, on a
// goroutine of its own: a listen that hangs (a connection the network
// swallows) must not hold the loop, which meanwhile claims on the notifier
// and the poll. Its answer comes on w.started, for begin.
func (w *runWake) listen(ctx context.Context) {
	w.retry = nil
	if w.store == nil || ctx.Err() != nil || w.started != nil {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	started := make(chan listenResult, 1)
	w.started, w.cancel = started, cancel
	w.starting.Go(func() {
		heard, stop, err := w.store.ListenEnqueued(lctx)
		started <- listenResult{heard, stop, err}
	})
}

// begin takes the answer of the listen in progress: listening, or a
// failure, logged and retried later. The loop claims after it either way:
// what was committed before the listener listened is never announced.
func (w *runWake) begin(ctx context.Context, r listenResult) {
	w.started = nil
	if r.err != nil {
		w.cancel()
		w.failed(ctx, r.err)
		return
	}
	w.heard, w.stop, w.since = r.heard, r.stop, w.d.clock.clock()
}

// proven resets the backoff once the listener heard an enqueue: it works.
func (w *runWake) proven() { w.backoff = listenRetryFirst }

// channels returns what the loop waits on: the listener's wake while it
// listens, else the notifier's channel (taken now: before the claim), and
// the retry timer's.
func (w *runWake) channels() (heard, notified <-chan struct{}, retry <-chan time.Time) {
	if w.retry != nil {
		retry = w.retry.C
	}
	if w.heard != nil {
		return w.heard, nil, retry
	}
	return nil, w.d.enqueued(), retry
}

// lost is called when the listener's wake was closed: listening ended.
// Unless Run is stopping, it is a failure: logged, and retried later.
func (w *runWake) lost(ctx context.Context) {
	if w.d.clock.clock().Sub(w.since) >= w.backoff {
		w.proven() // it listened longer than the last wait: not a listener lost as soon as it starts
	}
	err := w.close()
	if ctx.Err() == nil {
		w.failed(ctx, err)
	}
}

// failed logs err and sets the retry timer, backing off.
func (w *runWake) failed(ctx context.Context, err error) {
	msg := "listener ended"
	if err != nil {
		msg = err.Error()
	}
	w.d.obs.logf(ctx, slog.LevelWarn, "turnframe: run: not listening for enqueues; polling until listening again",
		slog.String("error", msg), slog.Duration("retry_in", w.backoff))
	w.retry = time.NewTimer(w.backoff)
	w.backoff = min(2*w.backoff, listenRetryMax)
}

// close stops the listener and the retry timer and returns the error that
// ended the listener, once everything it started has ended.
func (w *runWake) close() error {
	if w.started != nil { // a listen in progress: end it, and a listener it started
		w.cancel()
		w.starting.Wait()
		if r := <-w.started; r.err == nil {
			r.stop()
		}
		w.started = nil
	}
	if w.retry != nil {
		w.retry.Stop()
		w.retry = nil
	}
	if w.stop == nil {
		return nil
	}
	err := w.stop()
	w.cancel()
	w.heard, w.stop = nil, nil
	return err
}
