package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// waitForSleeper polls the server until a backend runs the App's marked
// statement.
func waitForSleeper(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND query LIKE '%app_cancel_marker%' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatalf("wait for the app's statement: %v", err)
		}
		if n > 0 {
			return
		}
	}
}

// DESIGN.md §4: "a cancelled or expired context is that context error"
// (translate); turn.go: "When ctx itself is cancelled while h runs, Execute
// returns ctx's error". Before a0898ff an App statement cut by the call's
// context failed with pgx's context error (the connection was closed), and
// the App's error carried context.Canceled. With Open's cancel-request
// handler it fails with the server's 57014 "canceling statement due to user
// request", and translate lets ErrAppWrite pass before it checks ctx: a
// caller cancelling its own call is told "the application's writes failed",
// with no context error in the chain.
func TestAnAppCutByTheCallersContextIsTheContextError(t *testing.T) {
	is := is.New(t)
	bg := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	watch, err := pgx.Connect(bg, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	defer watch.Close(bg)

	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	ctx, cancel := context.WithCancel(bg)
	res := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
			App: func(ctx context.Context, tx turnframe.Tx) error {
				ptx, _ := pgstore.PgxTx(tx)
				_, err := ptx.Exec(ctx, `SELECT pg_sleep(30) /* app_cancel_marker */`)
				return err
			},
		})
		res <- err
	}()
	waitForSleeper(t, watch)
	cancel()
	err = <-res
	t.Logf("apply: %v", err)
	is.True(err != nil)
	is.True(errors.Is(err, context.Canceled)) // the caller's own cancel, as the store says it is
}
