package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Run dispatches until ctx ends: the loop an application would otherwise
// write around RunOnce. It claims rows when they are due and sends and
// settles them as RunOnce does (same settlements, same lease keeper), with
// at most Concurrency sends in flight across its batches and no more per
// destination than DestinationLimits allows. It looks for due rows
//
//   - at once when any process enqueues, if the store is an
//     EnqueueListener (pgstore is: Run listens from its start, on a
//     goroutine of its own so a listen that hangs never holds it, and
//     stops listening before it returns; a listener that fails is logged
//     and started again with backoff, Run polling meanwhile);
//   - otherwise at once when this process enqueues, if the store is an
//     EnqueueNotifier (memstore and sqlitestore are: an Apply, an
//     ApplyTx, or Runtime.Execute's commit wakes it);
//   - every PollInterval, for rows enqueued elsewhere and retries whose
//     backoff ran out;
//   - again at once after a batch that filled the room it had, and when
//     one of its batches ends.
//
// At start and at every poll it also makes the outbox's part of
// Recovery.Recover (steps 1 and 2, the same code): claims whose lease
// ended become OutcomeUnknown, and every OutcomeUnknown row is handed to
// the policy of its destination's Remote, declared with WithDestination
// passed to NewDispatcher. It does so on a goroutine of its own, so a slow
// Verifier does not hold up sends. With a store that is an OutboxStore but
// not a Store, it only expires claims. Turns are not recovered: that is
// Recovery.Run's.
//
// When ctx ends, Run claims nothing more; rows claimed and not yet sent go
// back Pending (CodeNotSent); sends in flight go on for GracePeriod and are
// settled with what they answer; a send still unanswered then is
// OutcomeUnknown (CodeSendTimeout), never a retry. Run returns once every
// goroutine it started has ended (a Sender that ignores its context is the
// one exception, as for RunOnce). A process that dies under Run leaves what
// RunOnce leaves: claimed rows Dispatching until their lease ends, then
// expired by the next Run or Recover.
//
// The times Run claims and settles at are read from WithClock's clock. It
// returns nil when ctx ends. It returns an error only when it cannot go
// on: the store is closed (ErrClosed), once its sends in flight ended —
// found at once on memstore, sqlitestore and pgstore (their Close wakes
// it), at the next poll on a store that cannot wake it. Any other failure
// to claim or release — a busy file, a refused
// listing — is logged and tried again at the next poll. Run may be called
// concurrently with RunOnce and other Runs; they claim disjoint rows.
func (d *Dispatcher) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	sendCtx, endGrace := afterGrace(runCtx, d.cfg.GracePeriod)
	l := &runLoop{
		d: d, stop: runCtx, send: sendCtx, free: d.cfg.Concurrency,
		ended:    make(chan int, d.cfg.Concurrency),
		released: make(chan error, 1),
		wake:     newRunWake(d),
	}
	err := l.loop()
	stop()
	l.wake.close()
	l.work.Wait()
	endGrace()
	return err
}

// runLoop is one Run's state. Only the loop's goroutine touches free and
// releasing.
type runLoop struct {
	d    *Dispatcher
	stop context.Context // Run's: claiming and starting sends stop when it ends
	send context.Context // the sends': ends GracePeriod after stop

	free      int            // sends Run may still start: Concurrency minus the rows of its batches in flight
	ended     chan int       // a batch ended; its row count is free again
	releasing bool           // a release is running
	released  chan error     // a release ended, with its error
	work      sync.WaitGroup // the batches and the release in flight
	wake      *runWake       // the listener or notifier that wakes the loop (run_wake.go)
}

// loop claims and waits until the stop context ends or the store is closed.
func (l *runLoop) loop() error {
	poll := time.NewTicker(l.d.cfg.PollInterval)
	defer poll.Stop()
	release := true
	l.wake.listen(l.stop)
	for l.stop.Err() == nil {
		if release && !l.releasing {
			l.startRelease()
			release = false
		}
		heard, notified, retry := l.wake.channels() // taken before the claim, so an enqueue after it is not missed
		full, err := l.claim()
		if err != nil && l.stop.Err() == nil {
			if errors.Is(err, ErrClosed) {
				return fmt.Errorf("run: %w", err)
			}
			l.d.obs.logf(l.stop, slog.LevelWarn, "turnframe: run: claim failed; the next poll tries again", slog.String("error", err.Error()))
		}
		if full && l.free > 0 {
			continue // more may be due
		}
		select {
		case <-l.stop.Done():
		case <-notified:
		case _, ok := <-heard:
			if !ok {
				l.wake.lost(l.stop)
			} else {
				l.wake.proven()
			}
		case <-retry:
			l.wake.listen(l.stop)
		case r := <-l.wake.started:
			l.wake.begin(l.stop, r)
		case <-poll.C:
			release = true
		case n := <-l.ended:
			l.free += n
		case err := <-l.released:
			l.releasing = false
			if errors.Is(err, ErrClosed) {
				return fmt.Errorf("run: %w", err)
			}
		}
	}
	return nil
}

// claim claims as many due rows as Run has room for and starts their batch
// on a goroutine of its own. full reports that it got all it asked for.
func (l *runLoop) claim() (full bool, err error) {
	if l.free == 0 {
		return false, nil
	}
	limit := min(l.free, l.d.cfg.BatchSize)
	sw, err := l.d.claimLive(l.stop, l.send, l.stop, limit, func(start time.Time) time.Time {
		return start.UTC().Truncate(time.Microsecond)
	})
	if err != nil || sw == nil {
		return false, err
	}
	n := len(sw.claims)
	l.free -= n
	l.work.Go(func() {
		sw.run()
		l.ended <- n
	})
	return n == limit, nil
}

// startRelease expires ended claims and applies the policy to unknown rows
// on a goroutine of its own; its error comes back on released.
func (l *runLoop) startRelease() {
	l.releasing = true
	l.work.Go(func() {
		err := l.d.release(l.stop)
		if err != nil && l.stop.Err() == nil {
			l.d.obs.logf(l.stop, slog.LevelWarn, "turnframe: run: releasing ended claims failed; the next poll tries again",
				slog.String("error", err.Error()))
		}
		l.released <- err
	})
}

// release is the outbox's part of Recovery.Recover, run by Run: expire the
// claims whose lease ended (expireLive) and hand the unknown rows to the
// policy of their destination's Remote.
func (d *Dispatcher) release(ctx context.Context) error {
	expired, err := d.expireLive(ctx)
	countExpired(ctx, d.store, d.obs, expired)
	if err != nil {
		return fmt.Errorf("expire claims: %w", err)
	}
	s, ok := d.store.(Store)
	if !ok {
		return nil
	}
	r := &Recovery{store: s, cfg: d.clock, obs: d.obs}
	report := RecoverReport{Expired: expired}
	return r.resolveRows(ctx, &report)
}

// expireLive expires the claims whose lease ended, but never one of this
// Dispatcher's live sweeps, however the wall clock stepped. It holds the
// live gate alone, so no claim is between its clock reading and the live
// set; it reads its clock, then brings the leases of the live sweeps up to
// that clock (catchUp), then expires at that reading. Read first, a step
// before the reading is one the catch-up sees, and a step after it is one
// the expiry does not: a step between a catch-up that saw none and an
// expiry on the stepped clock would take the row of a live send.
func (d *Dispatcher) expireLive(ctx context.Context) ([]OutboxID, error) {
	if err := d.live.gate.take(ctx); err != nil {
		return nil, err
	}
	defer d.live.gate.give()
	now := d.clock.now()
	d.live.catchUp()
	return d.store.ExpireClaims(ctx, now)
}

// enqueued returns the channel the store closes at its next enqueue, or
// nil (never ready) for a store that is not an EnqueueNotifier.
func (d *Dispatcher) enqueued() <-chan struct{} {
	if n, ok := d.store.(EnqueueNotifier); ok {
		return n.Enqueued()
	}
	return nil
}

// afterGrace returns a context that ends grace after stop ended (not
// before), and a function that ends it at once and waits for the one
// goroutine that times it.
func afterGrace(stop context.Context, grace time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(stop))
	quit := make(chan struct{})
	var timer sync.WaitGroup
	timer.Go(func() {
		select {
		case <-stop.Done():
		case <-quit:
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-quit:
		}
	})
	return ctx, func() {
		close(quit)
		timer.Wait()
		cancel()
	}
}
