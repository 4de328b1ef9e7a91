package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A write refused because its session is read-only is ErrBusy (§29 row 3):
// the database may take writes again, and the same call then lands. Not so
// in a transaction the caller began read-only: ApplyTx in it can never
// land, and ErrBusy sent a caller that retries in the same transaction
// round for ever. It is ErrInvalid, as a transaction at another isolation
// is, and the caller's transaction is left usable. One read-only because
// the database is (default_transaction_read_only) stays ErrBusy.
func TestApplyTxInAReadOnlyTransaction(t *testing.T) {
	for _, tt := range []struct {
		name  string
		begin func(ctx context.Context, c *pgx.Conn) (pgx.Tx, error)
		want  error
	}{
		{"BegunReadOnlyByTheCaller", func(ctx context.Context, c *pgx.Conn) (pgx.Tx, error) {
			return c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
		}, turnframe.ErrInvalid},
		{"OnADatabaseFrozenReadOnly", func(ctx context.Context, c *pgx.Conn) (pgx.Tx, error) {
			if _, err := c.Exec(ctx, `SET default_transaction_read_only = on`); err != nil {
				return nil, err
			}
			return c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		}, turnframe.ErrBusy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s, _, commit := appTxWithItsOwnRow(t)
			c, err := s.Pool().Acquire(ctx)
			is.NoErr(err)
			defer c.Release()
			defer c.Exec(context.Background(), `RESET default_transaction_read_only`)
			tx, err := tt.begin(ctx, c.Conn())
			is.NoErr(err)
			defer tx.Rollback(ctx)
			_, err = s.ApplyTx(ctx, tx, commit)
			t.Logf("ApplyTx: %v", err)
			is.True(errors.Is(err, tt.want)) // refused for good, or for now
			var one int
			is.NoErr(tx.QueryRow(ctx, `SELECT 1`).Scan(&one)) // tx usable
		})
	}
}
