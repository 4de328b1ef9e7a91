package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// ApplyTx: "after an error, tx holds nothing of w and everything the caller
// wrote before, so the caller may go on and commit its own rows", and
// applySavepoint rolls back to its savepoint "even if ctx ended". A context
// that ends while ApplyTx waits (here for its turn's lock, held by another
// transaction of the application's) makes pgx close the connection under
// the caller's transaction: ApplyTx returns the context's error, and the
// caller's own row — written before, and promised to survive — can no longer
// be committed.
func TestApplyTxCancelledWhileWaitingKeepsTheCallersRows(t *testing.T) {
	is := is.New(t)
	s, tx, commit := appTxWithItsOwnRow(t)
	bg := context.Background()

	x, err := pgx.Connect(bg, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	defer x.Close(bg)
	xtx, err := x.Begin(bg)
	is.NoErr(err)
	_, err = xtx.Exec(bg, `SELECT 1 FROM turns WHERE id = $1 FOR UPDATE`, commit.Turn.String())
	is.NoErr(err)

	ctx, cancel := context.WithCancel(bg)
	res := make(chan error, 1)
	go func() {
		_, err := s.ApplyTx(ctx, tx, commit)
		res <- err
	}()
	waitForLockWaiter(t, x)
	cancel()
	err = <-res
	is.True(errors.Is(err, context.Canceled)) // the call ended with its context
	is.NoErr(xtx.Rollback(bg))

	err = tx.Commit(bg)
	t.Logf("commit after the cancelled ApplyTx: %v", err)
	is.NoErr(err)                        // the caller goes on and commits its own rows
	is.Equal(count(t, s, "bookings"), 1) // the app's row, written before ApplyTx
	is.Equal(count(t, s, "outbox"), 0)   // nothing of the Write
}
