package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Round trips. A write transaction sends a statement whose only answer is
// its error (an INSERT or UPDATE whose rows it knows, an advisory lock, the
// audit records, pg_notify, and BEGIN and COMMIT themselves) not at once but
// queued on its wtx (queue), and sends the queue, in order, in one pgx.Batch
// (one pipeline, one round trip) with the next statement whose answer it
// needs: a read, or the COMMIT. The server runs the statements in exactly
// the order the code issued them, so every lock is taken in the same order
// and every read sees the same rows as if each had been sent alone; the
// batch ends at its first error and the server runs nothing after it.
//
// Only the moment a queued statement's error reaches the code moves: to the
// next send. A check in Go that fails between a queued statement and that
// send returns before it, so the transaction sends its queue then
// (flushFirst) and reports the queued statement's error, if any, in the
// check's place: every call returns the error it returned when each
// statement went alone.

// queued is a statement waiting in a wtx's queue; wrap gives its error
// its context.
type queued struct {
	sql  string
	args []any
	wrap func(error) error
}

// batcher is what a write transaction sends its statements through: a
// connection in a transaction, or a pgx.Tx (the App's transaction, or
// ApplyTx's savepoint).
type batcher interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// queue adds a statement that answers only with its error to the queue;
// wrap, if not nil, gives the error context.
func (t *wtx) queue(wrap func(error) error, sql string, args ...any) {
	t.queued = append(t.queued, queued{sql: sql, args: args, wrap: wrap})
}

// wrapf returns a wrap that prefixes an error with format and args.
func wrapf(format string, args ...any) func(error) error {
	return func(err error) error { return fmt.Errorf(format+": %w", append(args, err)...) }
}

// send sends the queue, then the statement sql if it is not empty, in one
// batch, and returns the batch's results positioned at that statement. An
// error of a queued statement comes back wrapped, with the batch closed.
// The queue is empty after it, whatever the outcome.
func (t *wtx) send(ctx context.Context, sql string, args ...any) (pgx.BatchResults, error) {
	var then []read
	if sql != "" {
		then = []read{{sql: sql, args: args}}
	}
	return t.sendThen(ctx, then)
}

// sendThen is send with the statements of several reads after the queue,
// and, while the transaction wants its id, the read of it last (xact.go).
func (t *wtx) sendThen(ctx context.Context, then []read) (pgx.BatchResults, error) {
	qs := t.queued
	t.queued = nil
	b := &pgx.Batch{}
	for _, q := range qs {
		b.Queue(q.sql, q.args...)
	}
	for _, r := range then {
		b.Queue(r.sql, r.args...)
	}
	t.queueXid(b)
	br := t.q.SendBatch(ctx, b)
	for _, q := range qs {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			notRun := notSent(err)
			if q.wrap != nil {
				err = q.wrap(err)
			}
			if notRun {
				err = queuedFailed{err}
			}
			return nil, err
		}
	}
	return br, nil
}

// queuedFailed is the error of a queued statement that proves nothing of
// its batch after it ran: the server answered the statement with an error
// (it runs a pipeline in order and, once a statement failed, skips the
// rest up to the batch's end), or nothing of the batch was sent. A COMMIT
// that was queued after it did not run: the transaction was rolled back.
type queuedFailed struct{ error }

func (e queuedFailed) Unwrap() error { return e.error }

// notSent reports whether err, met at a queued statement, proves that the
// statements after it in its batch did not run: an error the server
// answered (a *pgconn.PgError: FATAL too, a session terminated while idle
// in its transaction), or a batch of which nothing was written
// (pgconn.SafeToRetry). A connection lost while its answers were awaited
// proves nothing: the server may have run all of it.
func notSent(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) || pgconn.SafeToRetry(err)
}

// read is a statement that answers with one row, and what reads it.
type read struct {
	sql  string
	args []any
	scan func(pgx.Row) error
}

// readAll sends the queue and the statements of reads, in order, in one
// round trip, and hands each one's row to its scan, in order, until one
// returns an error, which readAll returns.
func (t *wtx) readAll(ctx context.Context, reads []read) error {
	if len(reads) == 0 {
		return nil
	}
	br, err := t.sendThen(ctx, reads)
	if err != nil {
		return err
	}
	for _, r := range reads {
		if err := r.scan(br.QueryRow()); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// flush sends the queue, if any, in one round trip.
func (t *wtx) flush(ctx context.Context) error {
	if len(t.queued) == 0 {
		return nil
	}
	br, err := t.send(ctx, "")
	if err != nil {
		return err
	}
	return br.Close()
}

// flushFirst returns err, the error of a check made after statements that
// are still queued, unless one of those fails: then that statement's
// error, the one a call that sent each statement alone met first.
func (t *wtx) flushFirst(ctx context.Context, err error) error {
	if err == nil || len(t.queued) == 0 {
		return err
	}
	if ferr := t.flush(ctx); ferr != nil {
		return ferr
	}
	return err
}

// Exec runs sql after the queue, in the same round trip. Exec, QueryRow
// and Query send a batch even with nothing queued while the transaction
// wants its id, which is read in it.
func (t *wtx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(t.queued) == 0 && !t.wantsXid() {
		return t.q.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql after the queue, in the same round trip.
func (t *wtx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(t.queued) == 0 && !t.wantsXid() {
		return t.q.QueryRow(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// Query runs sql after the queue, in the same round trip.
func (t *wtx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(t.queued) == 0 && !t.wantsXid() {
		return t.q.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// errRow is a pgx.Row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the row of a batch's last statement: Scan reads it, then
// closes the batch, which frees the connection.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a batch's last statement: Close closes them,
// then the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if cerr := r.br.Close(); r.err == nil {
		r.err = cerr
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}
