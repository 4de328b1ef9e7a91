package turnframe

import (
	"context"
	"log/slog"
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
	retry   *time.Timer     // when to listen again after a failure; nil if none is due
	backoff time.Duration   // the wait before the next retry
}

func newRunWake(d *Dispatcher) *runWake {
	w := &runWake{d: d, backoff: listenRetryFirst}
	w.store, _ = d.store.(EnqueueListener)
	return w
}

// listen starts listening, if the store is an EnqueueListener; on failure it
// logs a warning and sets the retry timer.
func (w *runWake) listen(ctx context.Context) {
	w.retry = nil
	if w.store == nil || ctx.Err() != nil {
		return
	}
	heard, stop, err := w.store.ListenEnqueued(ctx)
	if err != nil {
		w.failed(ctx, err)
		return
	}
	w.heard, w.stop, w.backoff = heard, stop, listenRetryFirst
}

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
	if w.retry != nil {
		w.retry.Stop()
		w.retry = nil
	}
	if w.stop == nil {
		return nil
	}
	err := w.stop()
	w.heard, w.stop = nil, nil
	return err
}
