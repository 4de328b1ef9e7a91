package turnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// A chat platform that saw no quick answer delivers a message again under
// the same id: the second delivery is answered from the first turn, and
// the booking it asked for runs once.
func ExampleRuntime_ReceiveMessage() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }))
	conv := rt.NewConversationID()
	book := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		fmt.Println("booking a table for two")
		return turnframe.Commit(nil)
	})

	handle := func(in turnframe.Inbound) {
		r, err := rt.ReceiveMessage(ctx, in)
		if err != nil {
			fmt.Println(err)
			return
		}
		if r.Redelivered {
			fmt.Printf("redelivered (turn %s): %q\n", r.Phase, r.Response)
			return
		}
		_, _ = rt.Plan(ctx, in.Account, r.Turn, turnframe.Plan{Commands: []turnframe.Command{
			{Key: "acme-book-" + turnframe.IdempotencyKey(in.MessageID), Case: "table/7", Name: "book"},
		}})
		_, _ = rt.Execute(ctx, in.Account, r.Turn, book)
		_ = rt.Deliver(ctx, in.Account, r.Turn, "Booked: a table for two at 8.")
		fmt.Println("answered")
	}
	msg := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "update-4711", Text: "A table for two at 8, please."}
	handle(msg)
	handle(msg) // the platform delivers it again
	// Output:
	// booking a table for two
	// answered
	// redelivered (turn delivered): "Booked: a table for two at 8."
}
