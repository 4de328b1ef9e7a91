package turnframe_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// busyThenStep refuses the first write of a command's outcome as busy,
// and steps clk's wall clock forward two hours as it does if step says so;
// it holds the second try until let is closed, after telling of it on
// retried.
type busyThenStep struct {
	turnframe.Store
	clk     *osClock
	step    bool
	tries   atomic.Int32
	retried chan struct{}
	let     chan struct{}
	// renewals holds the lease of every renewal written after the first
	// busy answer: follow's, which must never reach past the lease taken
	// before the call.
	renewals atomic.Pointer[[]time.Duration]
}

func (s *busyThenStep) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting && s.tries.Load() > 0 {
		var leases []time.Duration
		if p := s.renewals.Load(); p != nil {
			leases = *p
		}
		leases = append(leases, w.Settle[0].Lease)
		s.renewals.Store(&leases)
	}
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalCommitted {
		switch s.tries.Add(1) {
		case 1:
			if s.step {
				s.clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward while the outcome waits
			}
			return turnframe.Applied{}, fmt.Errorf("apply: %w", turnframe.ErrBusy)
		case 2:
			close(s.retried)
			<-s.let
		}
	}
	return s.Store.Apply(ctx, w)
}

// Execute writes a command's outcome "again with backoff while the store
// refuses it as ErrBusy and the attempt's lease lasts". It judged the lease
// on the wall clock: a forward step while the outcome waited (an NTP step,
// a machine resumed from sleep) read as the lease's end, so a commit that
// happened was given up after one busy answer, and the next Execute took
// the command over and ran it again. Nor was the lease renewed, so another
// process's Execute could take it over while the outcome was written.
func TestAStepWhileACommandsOutcomeIsWrittenNeitherDropsItNorLetsTheCommandRunAgain(t *testing.T) {
	for _, tt := range []struct {
		name          string
		stepInHandler bool // the step comes as the handler returns, before the attempt's keeper looks
	}{
		{"WhileTheOutcomeWaits", false},
		{"AsTheHandlerReturns", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testAStepWhileACommandsOutcomeIsWritten(t, tt.stepInHandler)
		})
	}
}

func testAStepWhileACommandsOutcomeIsWritten(t *testing.T, stepInHandler bool) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clk := &osClock{}
		held := &busyThenStep{Store: store, clk: clk, step: !stepInHandler, retried: make(chan struct{}), let: make(chan struct{})}
		first := turnframe.New(held, turnframe.WithClock(clk.read)) // a command timeout and a margin of 30 s
		second := turnframe.New(store, turnframe.WithClock(clk.read))
		ctx := context.Background()
		turn := rtPlanned(t, first, "acme", turnframe.Command{Key: "pay-1", Case: "invoice/1", Name: "pay"})

		var calls atomic.Int32
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls.Add(1)
			if stepInHandler {
				clk.step.Store(int64(2 * time.Hour))
			}
			return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
		})
		type result struct {
			r   turnframe.ExecuteReport
			err error
		}
		out := make(chan result, 1)
		go func() {
			r, err := first.Execute(ctx, "acme", turn, h)
			out <- result{r, err}
		}()
		var again turnframe.ExecuteReport
		select {
		case <-held.retried: // the outcome is written again after the step
			var err error
			again, err = second.Execute(ctx, "acme", turn, h)
			is.NoErr(err)
			close(held.let)
			renewals := held.renewals.Load()
			is.True(renewals != nil) // the step was followed by a renewal
			for _, lease := range *renewals {
				is.True(lease < time.Minute) // to where the lease taken ends, never a whole command lease further
			}
		case res := <-out:
			t.Fatalf("the outcome was given up after the step: %+v, %v", res.r, res.err)
		}
		done := <-out
		is.NoErr(done.err)
		t.Logf("second Execute: %+v; first: %+v", again.Results, done.r.Results)
		is.Equal(calls.Load(), int32(1))                            // the command ran once
		is.Equal(again.Results[0].Kind, turnframe.ResultInFlight)   // the second Execute left it to the attempt writing its outcome
		is.Equal(done.r.Results[0].Kind, turnframe.ResultCommitted) // whose commit landed
	})
}
