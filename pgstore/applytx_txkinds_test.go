package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Caller transactions ApplyTx should refuse or fail on, each leaving the
// caller's own rows committable (a probe: these held).
func TestApplyTxOnOddTransactions(t *testing.T) {
	for _, opts := range []pgx.TxOptions{
		{IsoLevel: pgx.RepeatableRead},
		{IsoLevel: pgx.Serializable},
		{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable},
		{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly},
	} {
		t.Run(string(opts.IsoLevel)+string(opts.AccessMode), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s, _, commit := appTxWithItsOwnRow(t)
			tx, err := s.Pool().BeginTx(ctx, opts)
			is.NoErr(err)
			defer tx.Rollback(ctx)
			var one int
			is.NoErr(tx.QueryRow(ctx, `SELECT 1`).Scan(&one))
			_, err = s.ApplyTx(ctx, tx, commit)
			t.Logf("%+v: %v", opts, err)
			is.True(err != nil)
			is.NoErr(tx.QueryRow(ctx, `SELECT 1`).Scan(&one)) // tx usable
			is.NoErr(tx.Commit(ctx))
			is.Equal(count(t, s, "outbox"), 0)
		})
	}
	t.Run("aborted", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s, tx, commit := appTxWithItsOwnRow(t)
		_, err := tx.Exec(ctx, `SELECT 1/0`)
		is.True(err != nil)
		_, err = s.ApplyTx(ctx, tx, commit)
		t.Logf("aborted: %v", err)
		is.True(err != nil)
		is.True(!errors.Is(err, turnframe.ErrConflict))
		is.Equal(count(t, s, "outbox"), 0)
	})
}
