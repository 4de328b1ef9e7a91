package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/turnframe/turnframe"
)

// querier is what a helper reads or writes through: a transaction, or the
// pool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// wtx is one write transaction: where its statements go, the statements
// it queued (batch.go), the history records its moves queued (history.go),
// and whether it handed itself to an App.
type wtx struct {
	q       batcher
	app     pgx.Tx // what an App is handed (apptx.go); nil when the call has none
	queued  []queued
	history []turnframe.HistoryRecord
	appRan  bool // Write.App was called: the transaction must not run again
	xact         // the transaction's id, read with its first batches (xact.go)

	// callerNow, when not zero, is the caller's now of a call whose frame
	// (frame.go) is read in the transaction's statement that locks its turn
	// (apply.go), and frame is that frame once read.
	callerNow time.Time
	frame     frame
}

// inTx runs f in one READ COMMITTED transaction, writes the history records
// f queued (flushHistory) and commits, or rolls it all back (on an error or
// a panic) and returns the error wrapped for op. A transaction that
// PostgreSQL ended with a deadlock or a serialization failure is run again,
// from the start, up to the store's retries, unless it called an App (which
// runs at most once per call); then the error is ErrBusy.
func (s *Store) inTx(ctx context.Context, op string, f func(tx *wtx) error) error {
	return s.inTxFor(ctx, op, false, f)
}

// inTxFor is inTx for a call that hands the transaction to an App (app):
// its transaction is a pgx.Tx, begun in a round trip of its own, and the
// App gets it (wtx.app).
func (s *Store) inTxFor(ctx context.Context, op string, app bool, f func(tx *wtx) error) error {
	done, err := s.enter(op)
	if err != nil {
		return err
	}
	defer done()
	for try := 0; ; try++ {
		tx, err := s.runTx(ctx, app, f)
		err = s.commitOutcome(ctx, err)
		if err == nil {
			return nil
		}
		if !retryable(err) || tx == nil || tx.appRan || try >= s.retries || ctx.Err() != nil {
			return s.fail(ctx, op, err)
		}
	}
}

// runTx runs f once in a transaction of its own, on a connection of the
// pool, and commits it. tx is nil when no transaction began. The BEGIN is
// queued (batch.go), so it goes with f's first statement, and the COMMIT
// goes with the statements still queued at the end: a transaction of one
// read and some writes costs two round trips. With app, the transaction is
// a pgx.Tx begun at once, for the App (wtx.app). Either way it is ended by
// the statement COMMIT (or ROLLBACK) on the connection, which then goes
// back to the pool, idle.
func (s *Store) runTx(ctx context.Context, app bool, f func(tx *wtx) error) (*wtx, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, acquireLost(ctx, err)
	}
	// Released last: a connection still in a transaction (a rollback
	// that failed) is closed by the pool, never reused.
	defer c.Release()
	conn := c.Conn()
	tx := &wtx{q: s.on(conn), xact: xact{askXid: true}}
	if app {
		ptx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return tx, connLost(ctx, conn, err)
		}
		tx.q, tx.app = s.on(ptx), ptx
	} else {
		tx.queue(nil, "begin isolation level read committed")
	}
	tx.queue(nil, sessionGuardSQL, s.lockTimeout) // what the session was left with weakens nothing (settings.go)
	committed := false
	defer func() {
		if !committed && conn.PgConn().TxStatus() != 'I' {
			// An error or a panic: roll back even if ctx ended, so the
			// connection goes back to the pool clean.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		}
	}()
	if err := f(tx); err != nil {
		return tx, connLost(ctx, conn, tx.appAborted(tx.flushFirst(ctx, err)))
	}
	if err := tx.flushHistory(ctx); err != nil {
		return tx, connLost(ctx, conn, tx.appAborted(err))
	}
	tx.askXid = false // read before the COMMIT's batch, or not at all
	// No id by now, and nothing to send with the COMMIT: the
	// transaction wrote nothing (xact.go).
	wroteNothing := tx.none && tx.xid == "" && !tx.appRan && len(tx.queued) == 0
	// pgx reports a COMMIT sent alone whose answer broke off as "conn
	// closed", which it calls safe to retry (it reads that error from
	// the connection it closed): only a connection closed before the
	// COMMIT proves it was not sent.
	open := !conn.IsClosed()
	tag, err := tx.Exec(ctx, "commit")
	if err != nil {
		if errors.As(err, new(queuedFailed)) && (!open || errors.As(err, new(*pgconn.PgError))) {
			// A statement queued before the COMMIT failed with the
			// server's answer (or nothing was sent), so the COMMIT
			// never ran: a connection that broke there broke
			// before the COMMIT was sent (a session terminated while
			// idle in its transaction), nothing was written. Not so
			// pgx's "conn closed" on an open connection: under the
			// simple protocol it is how an answer that broke off
			// surfaces, the COMMIT's included.
			err = connLost(ctx, conn, err)
		} else if !errors.As(err, new(*pgconn.PgError)) && (open || !pgconn.SafeToRetry(err)) {
			// The COMMIT was sent and no answer came: it may have
			// run on the server (inTxFor asks, commitOutcome).
			err = commitUnknown{err, tx.xid, wroteNothing}
		}
		return tx, tx.appAborted(err)
	}
	if tag.String() == "ROLLBACK" {
		return tx, tx.appAborted(pgx.ErrTxCommitRollback)
	}
	committed = true
	return tx, nil
}

// appAborted returns err as ErrAppWrite when it says the transaction was
// aborted after the App ran (a statement of the app's failed, and the app
// returned nil, or its error was not what ended it): PostgreSQL refuses
// every later statement of an aborted transaction, and its COMMIT rolls
// back. The app's failure, not the store's.
func (tx *wtx) appAborted(err error) error {
	if err == nil || !tx.appRan || errors.Is(err, turnframe.ErrAppWrite) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrTxCommitRollback) || (errors.As(err, &pgErr) && pgErr.Code == "25P02") {
		return fmt.Errorf("%w: a statement of the app's failed and aborted the transaction (its function returned nil): %w", turnframe.ErrAppWrite, err)
	}
	// An integrity violation after the App ran is one of its deferred
	// constraints, checked at the COMMIT: the store's own constraints are
	// all immediate, and its statements ran before the App.
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23") {
		return fmt.Errorf("%w: a deferred constraint of the app's failed at the commit: %w", turnframe.ErrAppWrite, err)
	}
	return err
}

// commitUnknown is the error of a COMMIT that was sent but not answered (the
// connection broke, or the caller's context ended and pgx closed it): the
// transaction may have committed. xid is its id, if it was read: what
// commitOutcome asks the server about. wroteNothing says it had none when
// the COMMIT was sent alone: nothing to ask.
type commitUnknown struct {
	error
	xid          string
	wroteNothing bool
}

func (e commitUnknown) Unwrap() error { return e.error }

// errConnLost says the connection broke before the transaction's COMMIT was
// sent: the server rolled the transaction back with the connection, so
// nothing was written and the call may run again (on another connection).
var errConnLost = errors.New("the server could not be reached, or the connection was lost before the commit: nothing was written")

// connLost marks err, met before the COMMIT was sent, as errConnLost when
// the connection is gone and the caller's context did not end it.
func connLost(ctx context.Context, conn *pgx.Conn, err error) error {
	if err == nil || ctx.Err() != nil || !conn.IsClosed() {
		return err
	}
	return fmt.Errorf("%w: %w", errConnLost, err)
}

// acquireLost marks an Acquire's error as errConnLost: no connection could
// be opened, nothing was sent. Not retried (each try may wait out a connect
// timeout): ErrBusy, for the caller to try again.
func acquireLost(ctx context.Context, err error) error {
	if ctx.Err() == nil && !errors.Is(err, puddle.ErrClosedPool) {
		return fmt.Errorf("%w: %w", errConnLost, err)
	}
	return err
}

// beginLost marks the error of the pool's BeginTx as errConnLost unless the
// server answered the BEGIN with an error of the statement's own: a BEGIN
// that failed under a live context met a connection that could not be
// opened or that the server had ended (a restart, a failover: FATAL), and
// the pool gave it back before its error could be read. Nothing began.
func beginLost(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC" {
		return err
	}
	return acquireLost(ctx, err)
}
