package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestRowsNeverSentDoNotSpendTheAttemptBudget: CodeNotSent says of a row
// put back because the sweep stopped before its send that nothing left. A
// row a stopping RunOnce (or Run's shutdown, or a destination limit waited
// out) claimed twice without sending, then sent once and answered 503, must
// not be Failed with CodeAttemptsExhausted after one send under
// MaxAttempts 3: a claim that sent nothing spends none of the budget.
func TestRowsNeverSentDoNotSpendTheAttemptBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		var sends atomic.Int64
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			sends.Add(1)
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}
		})
		cfg := turnframe.DispatchConfig{WorkerID: "w1", MaxAttempts: 3}
		for range 2 { // two sweeps stopped right after their claim: nothing sent
			ctx, cancel := context.WithCancel(context.Background())
			var reads atomic.Int64
			stopAtSweep := func() time.Time { // the first read is before the claim; the next, the sweep's, stops it
				if reads.Add(1) > 1 {
					cancel()
				}
				return dispNow
			}
			d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(stopAtSweep))
			report, err := d.RunOnce(ctx, dispNow)
			is.NoErr(err)
			is.Equal(report.Retried, []turnframe.OutboxID{rows[0].ID})
			is.Equal(dispGet(t, store, rows[0].ID).LastCode, turnframe.CodeNotSent)
		}
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
		_, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(sends.Load(), int64(1))                                        // one send so far
		is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxPending) // retried, not failed: 2 of its 3 attempts are left
	})
}
