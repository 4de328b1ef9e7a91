package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readPool is the pool as the store's reads use it: each statement runs on
// a connection it acquires itself, so that it can tell, as runTx does, a
// connection that could not be opened (acquireLost) or that the server
// ended under a live context (a restart, a failover, an idle cut: connLost)
// from any other failure. Either is errConnLost, ErrBusy: a read writes
// nothing, and made again it may answer. Through the pool's own Query the
// connection is gone before its error is read, and the error went out bare.
type readPool struct{ pool *pgxpool.Pool }

// Exec runs sql on a connection of its own, its loss errConnLost.
func (r readPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := r.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, acquireLost(ctx, err)
	}
	defer c.Release()
	tag, err := c.Exec(ctx, sql, args...)
	return tag, connLost(ctx, c.Conn(), err)
}

// Query runs sql on a connection of its own, which the rows give back when
// closed; a loss of it, before or while they are read, is errConnLost.
func (r readPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, acquireLost(ctx, err)
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		err = connLost(ctx, c.Conn(), err)
		c.Release()
		return nil, err
	}
	return &readRows{Rows: rows, ctx: ctx, c: c}, nil
}

// QueryRow is Query read as one row (readRow).
func (r readPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := r.Query(ctx, sql, args...)
	return readRow{rows: rows, err: err}
}

// SendBatch is the pool's: the store's reads send no batch.
func (r readPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return r.pool.SendBatch(ctx, b)
}

// readRows are a read's rows on the connection readPool acquired, which
// they give back when closed (at the end of Next, as pgxpool's do). Their
// error is errConnLost when the connection was closed with them under a
// live context.
type readRows struct {
	pgx.Rows
	ctx  context.Context
	c    *pgxpool.Conn // nil once given back
	lost bool          // the connection was closed when the rows were
}

func (r *readRows) Next() bool {
	if r.c == nil {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *readRows) Close() {
	if r.c == nil {
		return
	}
	r.Rows.Close()
	r.lost = r.ctx.Err() == nil && r.c.Conn().IsClosed()
	r.c.Release()
	r.c = nil
}

func (r *readRows) Err() error {
	err := r.Rows.Err()
	if r.c != nil {
		return connLost(r.ctx, r.c.Conn(), err)
	}
	if err != nil && r.lost {
		return fmt.Errorf("%w: %w", errConnLost, err)
	}
	return err
}

// readRow is QueryRow's row on readPool, read as pgx reads one.
type readRow struct {
	rows pgx.Rows
	err  error
}

func (r readRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		r.rows.Close()
		if lost := r.rows.Err(); lost != nil {
			return lost
		}
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
