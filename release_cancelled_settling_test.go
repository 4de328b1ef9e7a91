package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// expireLive's doc: Run's release expires ended claims "but never one of
// this Dispatcher's live sweeps, however the wall clock stepped". A sweep
// whose caller's context ended is still live while the settlement of its
// completed send is being written (RunOnce writes it past its context),
// but catchUp skipped it: after a forward step the release expired the row,
// the completed send's settlement was refused as ErrClaimLost, and the
// policy put the row back to be sent again. A shutdown (the context
// cancelled) during a slow settlement write is enough.
func TestAStepWhileACancelledSweepsSettlementIsWrittenLeavesTheRowToItsSweep(t *testing.T) {
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
	cancel()     // the process is shutting down: RunOnce writes the settlement past its context

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
}
