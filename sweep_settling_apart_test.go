package turnframe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// oneBlockedSender holds its send of row block until let is closed, and
// completes every send.
type oneBlockedSender struct {
	block turnframe.OutboxID
	sent  chan struct{} // closed once the held send started
	let   chan struct{}
}

func (s *oneBlockedSender) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	if e.ID == s.block {
		close(s.sent)
		<-s.let
	}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// lockedRowExtend refuses, as busy, every extension that takes in row
// locked (another session keeps it locked); its first Settle is held as
// heldSettle's.
type lockedRowExtend struct {
	*heldSettle
	locked turnframe.OutboxID
}

func (s *lockedRowExtend) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	for _, c := range claims {
		if c.ID == s.locked {
			return nil, errors.Join(errors.New("row locked"), turnframe.ErrBusy)
		}
	}
	return s.heldSettle.ExtendClaims(ctx, claims, now, lease)
}

// extendSettling: rows being settled "are extended apart from the other
// rows, so a row another session keeps locked holds up no other's
// extension". After a step, a live sweep's open row whose extension fails
// must not take the settling row's extension down with it: Run's release
// would expire the row of a completed send whose settlement is being
// written.
func TestASettlingRowIsExtendedApartFromAnOpenRowThatCannotBe(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1",
		turnframe.OutboxMessage{Destination: "payments"}, turnframe.OutboxMessage{Destination: "payments"})
	open, settling := rows[0].ID, rows[1].ID
	store := &lockedRowExtend{heldSettle: &heldSettle{Store: mem, held: make(chan struct{}), let: make(chan struct{})}, locked: open}
	sender := &oneBlockedSender{block: open, sent: make(chan struct{}), let: make(chan struct{})}
	cfg := runConfig()
	cfg.Concurrency = 2 // both rows sent at once
	d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clk.read))

	done := runOnceAsync(t, d, context.Background(), clk.read().UTC())
	<-sender.sent // one send runs
	<-store.held  // the other completed; its settlement is being written

	clk.step.Store(int64(2 * time.Hour))
	is.NoErr(turnframe.Release(context.Background(), d))
	got := dispGet(t, mem, settling)
	close(sender.let)
	close(store.let)
	sent := <-done
	t.Logf("the settling row was %v (%s) after the release; report %+v", got.Status, got.LastCode, sent)
	is.Equal(got.Status, turnframe.OutboxDispatching) // the release left the settling row to its sweep
	is.Equal(dispGet(t, mem, settling).Status, turnframe.OutboxCompleted)
}
