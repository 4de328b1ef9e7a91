package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// ApplyTx "needs read committed". PostgreSQL has no READ UNCOMMITTED of its
// own: "PostgreSQL's Read Uncommitted mode behaves like Read Committed"
// (docs, Transaction Isolation) — each statement on a fresh snapshot, the
// very property ApplyTx checks for. A caller's transaction begun with
// pgx.TxOptions{IsoLevel: pgx.ReadUncommitted} is refused as ErrInvalid
// all the same: the check compares the setting's name, not its behaviour.
func TestApplyTxTakesAReadUncommittedTransaction(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, _, commit := appTxWithItsOwnRow(t)
	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadUncommitted})
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = s.ApplyTx(ctx, tx, commit)
	t.Logf("apply tx at read uncommitted: %v", err)
	is.NoErr(err) // READ COMMITTED by another name
	is.NoErr(tx.Commit(ctx))
	is.Equal(count(t, s, "outbox"), 1)
}
