package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Execute writes a handler's outcome past the caller's context, so that an
// answer known only in memory lands (DESIGN.md §4). Each try is bounded by
// what is left of the attempt's lease: a write that waits for a lock
// another session keeps — an application's own transaction left open on
// the turn's row — returns once the lease ran out, instead of waiting for
// ever with no context left to end it.
func TestAnOutcomeWaitingForALockEndsWithItsLease(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := mustOpenURL(t, url)
	rt := turnframe.New(s, turnframe.WithCommandTimeout(time.Second), turnframe.WithLeaseMargin(time.Second))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "pay"}}})
	is.NoErr(err)

	blocker, err := pgx.Connect(ctx, url)
	is.NoErr(err)
	defer blocker.Close(context.Background())
	tx, err := blocker.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(context.Background())
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		// Meanwhile the app opens a transaction on the turn's row and
		// leaves it open.
		_, err := tx.Exec(ctx, `UPDATE turns SET updated_at = updated_at WHERE id = $1`, turn.String())
		is.NoErr(err)
		return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "paid"}})
	})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(ctx, "acme", turn, h)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("Execute: %v", err)
		is.True(err != nil) // the outcome could not be written while the lock was held
	case <-time.After(time.Minute): // a safety net, far past the 2 s lease
		t.Fatal("Execute still waits for a lock its lease ended under")
	}
}
