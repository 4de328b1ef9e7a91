package turnframe

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// attemptKeeper holds an attempt's lease while its handler runs. The lease
// covers the call (the command timeout and the lease margin from the take,
// renewed first if less is left), so the keeper has nothing to do unless
// the wall clock steps forward (an NTP step, a machine resumed from
// sleep): leases are stored and judged on the wall clock, while the
// handler's deadline is on the monotonic one, so after such a step the
// live attempt looks dead and another Execute would run the command beside
// it. The keeper looks every stepCheck, reading no store, and renews the
// lease when it ends within half a margin, as a sweep's keeper does
// (keepLeases).
type attemptKeeper struct {
	stop    chan struct{}
	done    chan struct{}
	running JournalEntry // the entry as last renewed; the keeper's until done is closed
	real    time.Time    // where running's lease ends on the real (monotonic) clock, which a wall step does not move
}

// keepAttempt starts the keeper of running's lease; end stops it. It never
// outlives the call it keeps: run ends it as soon as the handler returned.
func (x *execution) keepAttempt(ctx context.Context, running JournalEntry) *attemptKeeper {
	ends := time.Now().Add(running.LeaseUntil.Sub(x.rt.cfg.now()))
	k := &attemptKeeper{stop: make(chan struct{}), done: make(chan struct{}), running: running, real: ends}
	go k.keep(ctx, x)
	return k
}

// end stops the keeper, waits for it, and returns the entry as the keeper
// left it (renewed, or as it was handed over) and where its lease ends on
// the real clock.
func (k *attemptKeeper) end() (JournalEntry, time.Time) {
	close(k.stop)
	<-k.done
	return k.running, k.real
}

func (k *attemptKeeper) keep(ctx context.Context, x *execution) {
	defer close(k.done)
	tick := time.NewTicker(stepCheck)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-ctx.Done():
			return // the call ends with its caller
		case <-tick.C:
		}
		if k.running.LeaseUntil.After(x.rt.cfg.now().Add(x.rt.cfg.leaseMargin / 2)) {
			continue
		}
		mono := time.Now()
		renewed, err := x.renew(ctx, k.running)
		if err == nil {
			k.running, k.real = renewed, mono.Add(x.rt.cfg.commandLease())
			continue
		}
		attrs := []slog.Attr{slog.String("key", string(k.running.Key)), slog.String("attempt", k.running.Attempt.String()), slog.String("error", err.Error())}
		if errors.Is(err, ErrConflict) {
			x.rt.obs.logf(ctx, slog.LevelError, "turnframe: a command's attempt lost its entry while its handler runs; the command may run twice", attrs...)
			return
		}
		x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a command's lease, near its end, could not be renewed; its keeper tries again at its next look", attrs...)
	}
}
