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

// A message accepted under one Limits.Text and delivered again after the
// limit was lowered is still the redelivery it is: the channel gets the turn
// (and its answer), rather than an ErrInvalid it would retry for ever. The
// lowered limit still refuses every message it has not seen, and a
// longer text under a received id is still another message.
func TestARedeliveryOverALoweredTextLimitIsARedelivery(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		ctx := context.Background()
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		wide := turnframe.New(store, quiet)
		narrow := turnframe.New(store, quiet, turnframe.WithLimits(turnframe.Limits{Text: 5}))
		conv := wide.NewConversationID()
		long := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-long", Text: "hello there"}
		first, err := wide.ReceiveMessage(ctx, long)
		if err != nil {
			t.Fatalf("first delivery under the wide limit: %v", err)
		}
		if err := wide.Deliver(ctx, "acme", first.Turn, "hi"); err != nil {
			t.Fatalf("deliver: %v", err)
		}

		t.Run("TheSameMessageIsRedelivered", func(t *testing.T) {
			is := is.New(t)
			again, err := narrow.ReceiveMessage(ctx, long)
			is.NoErr(err)                                   // a redelivery, whatever the limit now
			is.True(again.Redelivered)                      // reported as one
			is.Equal(again.Turn, first.Turn)                // of the first turn
			is.Equal(again.Phase, turnframe.PhaseDelivered) // as stored
			is.Equal(again.Response, "hi")                  // with its answer to send again
		})
		t.Run("AnotherTextUnderTheIDIsConflict", func(t *testing.T) {
			is := is.New(t)
			other := long
			other.Text = "hello there!"
			_, err := narrow.ReceiveMessage(ctx, other)
			is.True(errors.Is(err, turnframe.ErrConflict)) // another message under a received id
		})
		t.Run("ANewMessageOverTheLimitIsInvalidAndWritesNothing", func(t *testing.T) {
			is := is.New(t)
			fresh := turnframe.Inbound{Account: "acme", Conversation: conv, MessageID: "m-new", Text: "hello there"}
			_, err := narrow.ReceiveMessage(ctx, fresh)
			is.True(errors.Is(err, turnframe.ErrInvalid))                                              // refused
			is.True(!errors.Is(err, turnframe.ErrAppWrite))                                            // as the input it is
			is.True(strings.Contains(err.Error(), "11 bytes, more than the limit of 5 (Limits.Text)")) // naming size and limit
			open, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: "acme"}, 10)
			is.NoErr(err)
			is.Equal(len(open), 0) // no turn begun (the first is delivered)
			fresh.Text = "hello"
			r, err := narrow.ReceiveMessage(ctx, fresh)
			is.NoErr(err)           // at the limit
			is.True(!r.Redelivered) // the refused delivery left its id unreceived
		})
		t.Run("ATextNoStoreHoldsIsInvalidUnderAReceivedID", func(t *testing.T) {
			is := is.New(t)
			for _, text := range []string{"hello\xffthere", strings.Repeat("x", turnframe.MaxTextLen+1)} {
				bad := long
				bad.Text = text
				_, err := narrow.ReceiveMessage(ctx, bad)
				is.True(errors.Is(err, turnframe.ErrInvalid)) // refused before the store is asked
			}
		})
		t.Run("WithoutAnIDOverTheLimitIsInvalid", func(t *testing.T) {
			is := is.New(t)
			_, err := narrow.Receive(ctx, "acme", conv, "hello there")
			is.True(errors.Is(err, turnframe.ErrInvalid)) // no id, no redelivery: refused
		})
	})
}
