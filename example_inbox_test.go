package turnframe_test

import (
	"context"
	"crypto/sha256"
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
		if _, err := rt.Plan(ctx, in.Account, r.Turn, turnframe.Plan{Commands: []turnframe.Command{
			{Key: messageKey("acme-book", in.MessageID), Case: "table/7", Name: "book"},
		}}); err != nil {
			fmt.Println(err)
			return
		}
		_, _ = rt.Execute(ctx, in.Account, r.Turn, book)
		_ = rt.Deliver(ctx, in.Account, r.Turn, "Booked: a table for two at 8.")
		fmt.Println("answered")
	}
	msg := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "update-4711", Text: "A table for two at 8, please."}
	handle(msg)
	handle(msg) // the platform delivers it again
	// A chat's id in the message id, as a platform whose ids are unique per
	// chat needs: a space and '~', which a key may not hold as they are.
	handle(turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "chat 42~update 17", Text: "And one at 9."})
	// Output:
	// booking a table for two
	// answered
	// redelivered (turn delivered): "Booked: a table for two at 8."
	// booking a table for two
	// answered
}

// messageKey derives a command's key from the message that asked for it.
// A MessageID may hold what a key may not (a space at an end, '~', 255
// bytes), so the key carries a digest of the id, not the id: a key Plan
// refuses would leave the turn received, with nobody able to plan it.
func messageKey(prefix string, id turnframe.MessageID) turnframe.IdempotencyKey {
	return turnframe.IdempotencyKey(fmt.Sprintf("%s-%x", prefix, sha256.Sum256([]byte(id))))
}
