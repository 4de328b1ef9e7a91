package turnframe_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestASenderThatExitsItsGoroutineIsUnknown: a Sender that ends its
// goroutine with runtime.Goexit — what t.Fatal, t.FailNow and t.Skip do in
// a fake sender, or any library that calls them — returns no answer and
// does not panic. callWithin then reports callTimedOut before the deadline,
// with no cause (context.Cause of a live context is nil), and the
// dispatcher's timeout log calls r.cause.Error() on that nil error: a nil
// pointer panic on the dispatcher's own sender goroutine, which nothing
// recovers — the whole process dies, with the row Dispatching. A Sender
// that panics is contained (DESIGN.md §2: "A panic is recovered and
// recorded as outcome unknown"); one that exits must be too. (Handler and
// Verifier survive the same: they log the cause with slog.Any.)
func TestASenderThatExitsItsGoroutineIsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			runtime.Goexit() // no answer, no panic
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(report.Unknown, []turnframe.OutboxID{rows[0].ID}) // it may have left: unknown
		is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown)
	})
}
