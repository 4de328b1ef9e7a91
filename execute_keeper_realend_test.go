package turnframe_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The attempt's keeper reports where the attempt's lease ends on the real
// clock, and record bounds the outcome's writes by it; follow, after a
// forward step while the outcome waits, renews the lease "to end, where it
// ends on the real clock ... never further". That end is what was left of
// the lease as the call began (the clock may have moved since the take),
// and, once the keeper renewed the lease during the call, where the renewal
// ends. Two mutants survived every test: the keeper taking a whole command
// lease from the call's start as its end (follow then renewed past the
// lease taken, by what the clock had moved), and the keeper not moving its
// end on a renewal (follow then renewed only to where the take's lease
// ended, and the attempt could be taken over while its commit was written).
// The entry's lease after follow, read on the real clock, must end where
// the lease the attempt last held did.
func TestFollowRenewsAnAttemptsLeaseToWhereItLastEndedOnTheRealClock(t *testing.T) {
	for _, tt := range []struct {
		name      string
		keeperRan bool // the wall clock steps an hour during the call: the keeper renews the lease
	}{
		{"TheClockMovedBetweenTheTakeAndTheCall", false},
		{"TheKeeperRenewedTheLeaseDuringTheCall", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testFollowRenewsToTheRealEnd(t, tt.keeperRan)
		})
	}
}

func testFollowRenewsToTheRealEnd(t *testing.T, keeperRan bool) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		const (
			timeout, margin = 30 * time.Second, 30 * time.Second
			moved           = 20 * time.Second // between the take and the call: less than the margin
			during          = time.Hour        // the step during the call
			writing         = 2 * time.Hour    // the step busyThenStep makes as the outcome waits
		)
		clk := &osClock{}
		held := &busyThenStep{Store: inner, clk: clk, step: true, retried: make(chan struct{}), let: make(chan struct{})}
		spy := &renewSpy{Store: held, renewed: make(chan time.Time, 1)}
		// The clock moves between the take and the call, as for a process
		// slow since its take, by less than the margin: Execute does not
		// renew the lease before the call.
		take := &rtSlowAfterTake{Store: spy, advance: func() { clk.step.Store(int64(moved)) }}
		rt := turnframe.New(take, turnframe.WithClock(clk.read), turnframe.WithCommandTimeout(timeout),
			turnframe.WithLeaseMargin(margin), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		ctx := context.Background()
		turn := rtPlanned(t, rt, rtAccount, rtCmd("pay-1", "invoice/1", "pay"))

		entered, proceed := make(chan struct{}), make(chan struct{})
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			close(entered)
			<-proceed
			return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
		})
		type result struct {
			r   turnframe.ExecuteReport
			err error
		}
		out := make(chan result, 1)
		go func() {
			r, err := rt.Execute(ctx, rtAccount, turn, h)
			out <- result{r, err}
		}()
		await(t, entered, "the handler is called")

		// Where the lease the attempt last holds ends on the real clock
		// (the wall clock less its step when the keeper last read it).
		end := rtEntry(t, inner, "pay-1").LeaseUntil.Add(-moved) // as taken
		if keeperRan {
			spy.armed.Store(true)
			clk.step.Store(int64(during))
			await(t, spy.renewed, "the keeper renews the lease after the step")
			end = rtEntry(t, inner, "pay-1").LeaseUntil.Add(-during)
		}
		close(proceed)

		select {
		case <-held.retried: // refused once as busy, the wall clock stepped meanwhile, and followed
		case res := <-out:
			t.Fatalf("the outcome was given up: %+v, %v", res.r, res.err)
		}
		is.True(held.renewals.Load() != nil) // follow renewed the lease after the step
		followed := rtEntry(t, inner, "pay-1").LeaseUntil.Add(-writing)
		close(held.let)
		res := await(t, out, "Execute returns")
		is.NoErr(res.err)
		is.Equal(res.r.Results[0].Kind, turnframe.ResultCommitted)

		t.Logf("lease after follow ends %v from where the attempt's lease ended", followed.Sub(end))
		// The slack is far above the microseconds between follow's two
		// readings of the clocks, and far below either mutant's error.
		slack := moved / 2
		is.True(!followed.After(end.Add(slack)))   // never past where the attempt's lease ended
		is.True(!followed.Before(end.Add(-slack))) // nor short of it
	})
}
