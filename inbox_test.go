package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// ReceiveMessage makes every delivery of one message id one turn, tells the
// caller which deliveries were redeliveries, and answers a redelivery of a
// delivered turn with what it delivered (issue 15).
func TestReceiveMessage(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		conv := rt.NewConversationID()
		msg := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-1", Text: "hello"}

		t.Run("FirstDeliveryBeginsATurn", func(t *testing.T) {
			is := is.New(t)
			r, err := rt.ReceiveMessage(ctx, msg)
			is.NoErr(err)
			is.True(!r.Redelivered)                    // a new turn
			is.Equal(r.Phase, turnframe.PhaseReceived) // received
			got, err := store.LoadTurn(ctx, "acme", r.Turn)
			is.NoErr(err)
			is.Equal(got.MessageID, msg.MessageID) // kept on the turn
		})
		t.Run("RedeliveryReportsTheTurnInItsPhase", func(t *testing.T) {
			is := is.New(t)
			first, err := rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-2", Text: "hi"})
			is.NoErr(err)
			again, err := rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-2", Text: "hi"})
			is.NoErr(err)
			is.True(again.Redelivered)                     // a redelivery
			is.Equal(again.Turn, first.Turn)               // of the first turn
			is.Equal(again.Phase, turnframe.PhaseReceived) // still running somewhere
			is.Equal(again.Response, "")                   // nothing delivered yet
			is.NoErr(rt.Deliver(ctx, "acme", first.Turn, "hello to you"))
			again, err = rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-2", Text: "hi"})
			is.NoErr(err)
			is.Equal(again.Phase, turnframe.PhaseDelivered) // delivered since
			is.Equal(again.Response, "hello to you")        // with the answer to send again
		})
		t.Run("AnotherMessageUnderTheIDIsConflict", func(t *testing.T) {
			is := is.New(t)
			_, err := rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-1", Text: "edited"})
			is.True(errors.Is(err, turnframe.ErrConflict)) // one id, one message
		})
		t.Run("ReceiveWithoutAnIDIsANewTurnEachTime", func(t *testing.T) {
			is := is.New(t)
			a, err := rt.Receive(ctx, "acme", conv, "hello")
			is.NoErr(err)
			b, err := rt.Receive(ctx, "acme", conv, "hello")
			is.NoErr(err)
			is.True(a != b) // two turns
		})
		t.Run("TextOverTheConfiguredLimitIsInvalidAndWritesNothing", func(t *testing.T) {
			is := is.New(t)
			small := turnframe.New(store, turnframe.WithLimits(turnframe.Limits{Text: 5}))
			in := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-long", Text: "hello!"}
			_, err := small.ReceiveMessage(ctx, in)
			is.True(errors.Is(err, turnframe.ErrInvalid))                                             // refused
			is.True(strings.Contains(err.Error(), "6 bytes, more than the limit of 5 (Limits.Text)")) // naming size and limit
			in.Text = "hello"
			r, err := small.ReceiveMessage(ctx, in)
			is.NoErr(err)           // at the limit
			is.True(!r.Redelivered) // the refused delivery wrote nothing: this one is the first
		})
		t.Run("BadMessageIDsAreInvalid", func(t *testing.T) {
			for _, id := range []turnframe.MessageID{"bad\nid", turnframe.MessageID(make([]byte, turnframe.MaxMessageIDLen+1)), "\xff"} {
				is := is.New(t)
				_, err := rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: id, Text: "x"})
				is.True(errors.Is(err, turnframe.ErrInvalid)) // refused
				var ie *turnframe.InvalidError
				is.True(errors.As(err, &ie))
				is.Equal(ie.Field, "message_id") // naming the field
			}
		})
	})
}
