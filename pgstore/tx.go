package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/turnframe/turnframe"
)

// querier is what a helper reads or writes through: a transaction, or the
// pool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// wtx is one write transaction: the pgx transaction, the history records
// its moves queued (history.go), and whether it handed itself to an App.
type wtx struct {
	pgx.Tx
	history []turnframe.HistoryRecord
	appRan  bool // Write.App was called: the transaction must not run again
}

// inTx runs f in one READ COMMITTED transaction, writes the history records
// f queued (flushHistory) and commits, or rolls it all back (on an error or
// a panic) and returns the error wrapped for op. A transaction that
// PostgreSQL ended with a deadlock or a serialization failure is run again,
// from the start, up to the store's retries, unless it called an App (which
// runs at most once per call); then the error is ErrBusy.
func (s *Store) inTx(ctx context.Context, op string, f func(tx *wtx) error) error {
	done, err := s.enter(op)
	if err != nil {
		return err
	}
	defer done()
	for try := 0; ; try++ {
		tx, err := s.runTx(ctx, f)
		if err == nil {
			return nil
		}
		if !retryable(err) || tx == nil || tx.appRan || try >= s.retries || ctx.Err() != nil {
			return s.fail(ctx, op, err)
		}
	}
}

// runTx runs f once in a transaction of its own and commits it. tx is nil
// when no transaction began.
func (s *Store) runTx(ctx context.Context, f func(tx *wtx) error) (*wtx, error) {
	ptx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	tx := &wtx{Tx: ptx}
	committed := false
	defer func() {
		if !committed {
			// An error or a panic: roll back even if ctx ended, so the
			// connection goes back to the pool clean.
			_ = ptx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := f(tx); err != nil {
		return tx, err
	}
	if err := tx.flushHistory(ctx); err != nil {
		return tx, err
	}
	committed = true // a failed Commit has ended the transaction too
	return tx, ptx.Commit(ctx)
}
