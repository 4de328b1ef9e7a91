package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// heldSettle holds the first Settle call until let is closed, after it
// tells of it on held.
type heldSettle struct {
	turnframe.Store
	held  chan struct{}
	let   chan struct{}
	first atomic.Bool
}

func (s *heldSettle) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	if s.first.CompareAndSwap(false, true) {
		s.held <- struct{}{}
		<-s.let
	}
	return s.Store.Settle(ctx, st)
}

// DESIGN.md "One clock": "Run's release reads its clock once, then brings
// the leases of its own Dispatcher's live sweeps up to the clock, then
// expires at that reading, so that release never takes them". A row whose
// send answered and whose settlement is being written (a busy SQLite file,
// a PostgreSQL row lock) is a row of a live sweep, but catchUp skipped it
// (endsSoon and extend leave settling rows alone): after a forward step the
// release expired it, the completed send's settlement was refused as
// ErrClaimLost, and the policy put the row back Pending: sent twice. It
// skipped every sweep whose caller's context had ended too, though RunOnce
// writes its settlements past its context: a shutdown during a slow
// settlement write was enough.
func TestAStepWhileASettlementIsWrittenLeavesTheRowToItsSweep(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cancelled bool // the caller's context ends while the settlement is written
	}{
		{"ALiveSweep", false},
		{"ASweepWhoseContextEnded", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			clk := &osClock{}
			mem := memstoreFor(t)
			rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
			store := &heldSettle{Store: mem, held: make(chan struct{}), let: make(chan struct{})}
			sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
			d := turnframe.NewDispatcher(store, sender, runConfig(), turnframe.WithClock(clk.read))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := runOnceAsync(t, d, ctx, clk.read().UTC())
			<-store.held // the send completed; its settlement is being written
			if tt.cancelled {
				cancel() // the process is shutting down: RunOnce writes the settlement past its context
			}

			clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
			is.NoErr(turnframe.Release(context.Background(), d))
			got := dispGet(t, mem, rows[0].ID)
			close(store.let)
			sent := <-done
			after := dispGet(t, mem, rows[0].ID)
			t.Logf("during the settlement the row was %v (%s); after it %v (%s); report %+v", got.Status, got.LastCode, after.Status, after.LastCode, sent)
			is.Equal(got.Status, turnframe.OutboxDispatching) // the release left the live sweep's row alone
			is.Equal(after.Status, turnframe.OutboxCompleted) // and its settlement landed
			is.Equal(sent.Completed, []turnframe.OutboxID{rows[0].ID})
		})
	}
}

// The same for a release elsewhere (a Recover, in this process or
// another): DESIGN.md says it may take the row of a live send only "in the
// second before the keeper looks". The keeper left rows being settled
// alone, so after a step a Recover took the row of a completed send for as
// long as its settlement was being written. And once the caller's context
// ended the keeper stopped, though the settlement is still written: after
// a step, a Recover took that row for as long as the write took.
func TestAKeeperFollowsAStepForARowWhoseSettlementIsBeingWritten(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cancelled bool // the caller's context ends while the settlement is written
	}{
		{"ALiveSweep", false},
		{"ASweepWhoseContextEnded", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			clk := &osClock{}
			mem := memstoreFor(t)
			rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
			held := &heldSettle{Store: mem, held: make(chan struct{}, 1), let: make(chan struct{})}
			spy := &extendSpy{Store: held, extended: make(chan time.Time, 1)}
			sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
			d := turnframe.NewDispatcher(spy, sender, runConfig(), turnframe.WithClock(clk.read)) // an extension every 15 s, a look every second
			rec := turnframe.NewRecovery(mem, turnframe.WithClock(clk.read))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := runOnceAsync(t, d, ctx, clk.read().UTC())
			<-held.held // the send completed; its settlement is being written
			if tt.cancelled {
				cancel() // the process is shutting down: RunOnce writes the settlement past its context
			}

			stepped := clk.read().Add(2 * time.Hour)
			clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
			followed := false
			select {
			case at := <-spy.extended:
				followed = !at.Before(stepped.Add(-time.Minute)) // extended on the stepped clock
			case <-time.After(10 * time.Second): // under the 15 s of the keeper's next extension
			}
			report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, boundsNoop{})
			is.NoErr(err)
			got := dispGet(t, mem, rows[0].ID)
			close(held.let)
			sent := <-done
			after := dispGet(t, mem, rows[0].ID)
			t.Logf("followed %v; Recover expired %v; the row was %v, then %v; report %+v", followed, report.Expired, got.Status, after.Status, sent)
			is.True(followed)                                 // the keeper followed the step within its looks
			is.Equal(len(report.Expired), 0)                  // the row of the completed send was not expired
			is.Equal(after.Status, turnframe.OutboxCompleted) // its settlement landed
			is.Equal(sent.Completed, []turnframe.OutboxID{rows[0].ID})
		})
	}
}
