package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
)

// BeginTx starts a transaction on a connection of the store's pool, at READ
// COMMITTED, for an application that writes its own tables in the same
// database and commits them together with a Write (ApplyTx). The caller
// must end it with Commit or Rollback; until then it holds a connection of
// the pool and the locks of what it wrote. Unlike sqlitestore's, it does not
// hold up the store's other writes: only those that need a lock it holds
// (the turns, entries, cases and order keys of the Writes applied in it)
// wait for its end, so the goroutine that holds it must not make such a
// call itself. Errors: ErrClosed after Close; otherwise the pool's,
// translated.
func (s *Store) BeginTx(ctx context.Context) (pgx.Tx, error) {
	done, err := s.enter("begin")
	if err != nil {
		return nil, err
	}
	defer done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, s.fail(ctx, "begin", err)
	}
	return tx, nil
}

// ApplyTx is Apply within tx, a transaction of the caller's (BeginTx, or one
// it began on the same database): it validates w (ErrInvalid) and writes it
// into tx, returning the same errors as Apply. Nothing is durable until the
// caller commits tx; if the caller rolls back, nothing of w was written.
// w is written under a savepoint: after an error, tx holds nothing of w and
// everything the caller wrote before, so the caller may go on and commit
// its own rows. w.App, if any, runs in tx under the same savepoint, after w.
// The savepoint is named turnframe_apply, a name the library keeps: an App
// that opened a savepoint of that name would have its own undone in place
// of w's (the database resolves a name to the newest savepoint holding it),
// and a refused w would stay in tx.
// Unlike Apply it never retries: a deadlock or a serialization failure is
// returned as ErrBusy, and the caller decides.
//
// Enqueued rows are announced to listeners (ListenEnqueued, so Dispatcher.Run
// in every process) by a pg_notify that PostgreSQL delivers when tx commits,
// and never if it rolls back. The store's Enqueued channel is not closed:
// the rows cannot be claimed before the caller's commit.
func (s *Store) ApplyTx(ctx context.Context, tx pgx.Tx, w turnframe.Write) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	if tx == nil {
		return turnframe.Applied{}, &turnframe.InvalidError{Field: "tx", Reason: "nil transaction"}
	}
	done, err := s.enter("apply")
	if err != nil {
		return turnframe.Applied{}, err
	}
	defer done()
	var (
		f         frame
		callerNow time.Time
	)
	if s.clock == DatabaseClock && w.Begin == nil {
		callerNow = w.Now // the frame is read as the turn is locked (lockTurnSQL)
	} else if f, err = s.frameAt(ctx, tx, "apply", w.Now); err != nil {
		return turnframe.Applied{}, err
	}
	applied, err := s.applySavepoint(ctx, tx, f.writeIn(w), callerNow)
	if err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply", err)
	}
	return f.appliedOut(applied), nil
}

// applySavepoint writes w in tx under a savepoint of its own name, rolled
// back on an error, even if ctx ended, so the caller's own rows stay. The
// savepoint is named, not a pgx nested transaction: a release that a context
// ending just then kept from the server (pgx sends nothing, yet counts a
// nested transaction closed) must still be undone, or the caller's commit
// would commit a Write it was told failed.
func (s *Store) applySavepoint(ctx context.Context, tx pgx.Tx, w turnframe.Write, callerNow time.Time) (turnframe.Applied, error) {
	if _, err := tx.Exec(ctx, "SAVEPOINT "+savepointName); err != nil {
		return turnframe.Applied{}, fmt.Errorf("savepoint: %w", err)
	}
	wt := &wtx{q: tx, app: tx, callerNow: callerNow}
	undo := func() error {
		uctx := context.WithoutCancel(ctx)
		if _, err := tx.Exec(uctx, "ROLLBACK TO SAVEPOINT "+savepointName); err != nil {
			return err
		}
		_, err := tx.Exec(uctx, "RELEASE SAVEPOINT "+savepointName)
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			undo() // a panic of w.App: a caller that recovers it and commits commits nothing of w
			panic(p)
		}
	}()
	applied, err := s.applyAndNotify(ctx, wt, w)
	if err == nil {
		err = wt.flush(ctx)
	}
	if err == nil {
		if _, err = tx.Exec(ctx, "RELEASE SAVEPOINT "+savepointName); err == nil {
			return wt.frame.appliedOut(applied), nil
		}
		err = wt.appAborted(fmt.Errorf("release savepoint: %w", err))
	} else {
		err = wt.appAborted(wt.flushFirst(ctx, err))
	}
	if rerr := undo(); rerr != nil {
		return turnframe.Applied{}, fmt.Errorf("%w (and undoing it failed: %v; roll tx back)", err, rerr)
	}
	return turnframe.Applied{}, err
}

// savepointName is the name of the savepoint ApplyTx writes under.
const savepointName = "turnframe_apply"
