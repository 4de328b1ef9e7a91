package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// heldClaim holds ClaimDue after its claim was made, until let is closed,
// having told of it on held: the instant between a claim's commit and its
// sweep's start.
type heldClaim struct {
	turnframe.Store
	held chan struct{}
	let  chan struct{}
}

func (s *heldClaim) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	close(s.held)
	<-s.let
	return claims, err
}

// DESIGN.md "One clock": Run's release never takes the rows of its own
// Dispatcher's live sweeps, however the clock stepped. A claim made before
// a forward step, whose sweep had not started yet, was not among them: the
// release expired the fresh claim, and the row, never sent, was handed to
// its policy as a send that may have left (for a remote that can do
// neither, escalated to a person). The claim and the release are now kept
// apart (liveSweeps.gate).
//
// The release is given a moment (releaseWindow) to run while the claim is
// held; the old code expired the row within it. The new code cannot run
// the release before the claim is let go, so that moment cannot make it
// fail.
func TestAStepBetweenAClaimAndItsSweepLeavesTheFreshClaimToRunsRelease(t *testing.T) {
	const releaseWindow = 200 * time.Millisecond
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &heldClaim{Store: mem, held: make(chan struct{}), let: make(chan struct{})}
	sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
	d := turnframe.NewDispatcher(store, sender, runConfig(), turnframe.WithClock(clk.read))

	done := runOnceAsync(t, d, context.Background(), clk.read().UTC())
	<-store.held // claimed, its sweep not started

	clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
	released := make(chan error, 1)
	go func() { released <- turnframe.Release(context.Background(), d) }()
	select {
	case err := <-released: // the old code: the release ran beside the claim
		released <- err
	case <-time.After(releaseWindow):
	}
	close(store.let)
	is.NoErr(<-released)
	sent := <-done
	got := dispGet(t, mem, rows[0].ID)
	t.Logf("report %+v; the row is %v (%s)", sent, got.Status, got.LastCode)
	is.Equal(len(sent.Unsettled), 0) // the claim held: its settlement landed
	// Sent and completed, or, if the sweep judged its lease before the
	// release caught it up to the step, put back unsent: never expired.
	sentOrNot := got.Status == turnframe.OutboxCompleted ||
		got.Status == turnframe.OutboxPending && got.LastCode == turnframe.CodeNotSent
	is.True(sentOrNot) // the fresh claim was not expired
}
