package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestARowNotYetSentWhenTheContextEndsIsNotSent: DESIGN.md §8, "A row
// whose send had not started when the context ended is put back Pending
// with CodeNotSent", and RunOnce's doc: "A row whose send had not started
// when ctx ended is not sent". The sweep checks its context when the row
// takes its destination's place (acquire) and then starts the send without
// looking again. A context that ends in between — here exactly there, from
// the clock the send reads for its latency, the last thing before the call
// — gets the Sender called with a context already ended, and the row,
// never sent, is recorded OutcomeUnknown (CodeSendTimeout): with a Remote
// that can neither be asked nor deduplicate, a person must settle a message
// that never left; undeclared, it waits for Settle for ever.
func TestARowNotYetSentWhenTheContextEndsIsNotSent(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var reads atomic.Int64
		clock := func() time.Time {
			if reads.Add(1) == 2 { // 1: the sweep's start; 2: the send's start, after the row's place was taken
				cancel() // the caller stops the sweep at this instant
			}
			return dispNow
		}
		called := make(chan error, 1)
		sender := turnframe.SenderFunc(func(sctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			called <- sctx.Err()
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.not_connected"}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1"}, turnframe.WithClock(clock))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)
		got := dispGet(t, store, rows[0].ID)
		is.Equal(got.LastCode, turnframe.CodeNotSent) // not sent: the context ended before its send started
		is.Equal(got.Status, turnframe.OutboxPending) // back in the queue, not an unknown outcome
		is.Equal(report.Retried, []turnframe.OutboxID{rows[0].ID})
		select {
		case err := <-called:
			t.Fatalf("the sender was called after the sweep's context ended (its context: %v)", err)
		default:
		}
	})
}
