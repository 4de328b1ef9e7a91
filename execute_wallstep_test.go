package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// renewSpy tells of each Apply that renews or takes an entry (a settlement
// to Executing) once armed.
type renewSpy struct {
	turnframe.Store
	armed   atomic.Bool
	renewed chan time.Time
}

func (s *renewSpy) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	a, err := s.Store.Apply(ctx, w)
	if err == nil && s.armed.Load() && len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting {
		select {
		case s.renewed <- w.Now:
		default:
		}
	}
	return a, err
}

// WithLeaseMargin and DESIGN.md "One clock" said an Execute's attempt was
// not extended while its handler runs: its lease (the command timeout and
// the margin) is stored and judged on the wall clock, the handler's
// deadline on the monotonic clock. After a forward wall step past the
// lease (an NTP step, a laptop resumed from sleep) the live attempt looked
// dead, and a second Execute took the command over and ran it beside the
// live call: a payment made twice. The attempt's keeper now looks every
// second and renews a lease the step brought near its end.
func TestAForwardWallStepNeverLetsASecondExecuteRunALiveCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clk := &osClock{}
		spy := &renewSpy{Store: store, renewed: make(chan time.Time, 1)}
		first := turnframe.New(spy, turnframe.WithClock(clk.read)) // a command timeout and a margin of 30 s
		second := turnframe.New(store, turnframe.WithClock(clk.read))
		ctx := context.Background()
		turn, err := first.Receive(ctx, "acme", first.NewConversationID(), "pay the invoice")
		is.NoErr(err)
		_, err = first.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "pay-1", Case: "invoice/1", Name: "pay"}}})
		is.NoErr(err)

		var calls atomic.Int32
		entered, proceed := make(chan struct{}), make(chan struct{})
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			if calls.Add(1) == 1 {
				close(entered)
				<-proceed
			}
			return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
		})
		out := make(chan turnframe.ExecuteReport, 1)
		go func() {
			r, err := first.Execute(ctx, "acme", turn, h)
			if err != nil {
				t.Error(err)
			}
			out <- r
		}()
		<-entered // the first call runs

		stepped := clk.read().Add(2 * time.Hour)
		spy.armed.Store(true)
		clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
		select {
		case at := <-spy.renewed:
			is.True(!at.Before(stepped.Add(-time.Minute))) // renewed on the stepped clock
		case <-time.After(10 * time.Second): // a bound for the failure: the keeper looks every second
			close(proceed)
			<-out
			t.Fatal("the attempt's lease was not renewed after the step")
		}
		again, err := second.Execute(ctx, "acme", turn, h)
		is.NoErr(err)
		close(proceed)
		done := <-out
		is.Equal(calls.Load(), int32(1))                            // the command ran once
		is.Equal(again.Results[0].Kind, turnframe.ResultInFlight)   // the second Execute left it to the live attempt
		is.Equal(done.Results[0].Kind, turnframe.ResultCommitted)   // and the live attempt committed it
		is.Equal(done.Results[0].Attempt, again.Results[0].Attempt) // under the attempt the second saw
	})
}
