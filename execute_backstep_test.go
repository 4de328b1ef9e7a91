package turnframe_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// busyOutcome refuses a command's outcome as busy for its first refusals
// tries, then writes it.
type busyOutcome struct {
	turnframe.Store
	refusals int32
	tries    atomic.Int32
}

func (s *busyOutcome) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalCommitted && s.tries.Add(1) <= s.refusals {
		return turnframe.Applied{}, fmt.Errorf("apply: %w", turnframe.ErrBusy)
	}
	return s.Store.Apply(ctx, w)
}

// record's doc: a command's outcome is written "again with backoff ... while
// the store refuses it as ErrBusy and the attempt's lease lasts. Given up,
// the entry stays Executing under an attempt nobody runs, and once its
// lease ended the next Execute takes it over ...: so it is given up only
// when that may happen anyway". After a backward step of the wall clock
// the lease, judged on the wall clock by every store, Recover and Execute,
// lasts two hours more; record gave the commit up once the lease's end on
// the real clock passed, and the command ran again once the wall lease
// ended.
func TestABackwardStepNeverGivesUpACommitWhileItsLeaseLasts(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		clk := &osClock{}
		// Ten refusals take the backoff more than four seconds (10 ms
		// doubling to 1 s): past the lease's two on the real clock.
		store := &busyOutcome{Store: inner, refusals: 10}
		opts := []turnframe.Option{turnframe.WithClock(clk.read), turnframe.WithCommandTimeout(time.Second),
			turnframe.WithLeaseMargin(time.Second), turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		ctx := context.Background()
		turn := rtPlanned(t, rt, "acme", turnframe.Command{Key: "pay-1", Case: "invoice/1", Name: "pay"})
		var calls atomic.Int32
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls.Add(1)
			clk.step.Store(int64(-2 * time.Hour)) // the wall clock steps back as the handler returns
			return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
		})
		r, err := rt.Execute(ctx, "acme", turn, h)
		is.NoErr(err)                                          // the commit was written once the store took it
		is.Equal(r.Results[0].Kind, turnframe.ResultCommitted) // not given up under a lease that lasts
		is.Equal(calls.Load(), int32(1))
	})
}
