package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// Runtime.ReceiveMessage on pgstore, in both of its clocks: a message
// received under a higher Limits.Text is a redelivery after the limit was
// lowered, and a message never received over the limit is ErrInvalid,
// refused inside the transaction that would have begun its turn, which
// leaves nothing behind (the root module's
// TestARedeliveryOverALoweredTextLimitIsARedelivery, on this store).
func TestARedeliveryOverALoweredTextLimitIsARedeliveryOnPostgreSQL(t *testing.T) {
	for _, clock := range []pgstore.Clock{pgstore.CallerClock, pgstore.DatabaseClock} {
		t.Run(clock.String(), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, pgstore.WithClock(clock))
			quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
			wide := turnframe.New(s, quiet)
			narrow := turnframe.New(s, quiet, turnframe.WithLimits(turnframe.Limits{Text: 5}))
			in := turnframe.Inbound{Account: "acme", Conversation: wide.NewConversationID(), MessageID: "upd-1", Text: "hello there"}
			first, err := wide.ReceiveMessage(ctx, in)
			is.NoErr(err) // received under the wide limit

			again, err := narrow.ReceiveMessage(ctx, in)
			is.NoErr(err)                    // a redelivery, whatever the limit now
			is.True(again.Redelivered)       // reported as one
			is.Equal(again.Turn, first.Turn) // of the first turn

			in.MessageID = "upd-2"
			_, err = narrow.ReceiveMessage(ctx, in)
			is.True(errors.Is(err, turnframe.ErrInvalid))   // a new message over the limit
			is.True(!errors.Is(err, turnframe.ErrAppWrite)) // refused as the input it is
			var turns int
			is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
			is.Equal(turns, 1) // nothing begun
		})
	}
}
