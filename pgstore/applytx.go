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
// call itself. Errors: ErrClosed after Close; ErrBusy when no connection
// could be opened or the server had ended the one taken (nothing began);
// otherwise the pool's, translated.
func (s *Store) BeginTx(ctx context.Context) (pgx.Tx, error) {
	done, err := s.enter("begin")
	if err != nil {
		return nil, err
	}
	defer done()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, s.fail(ctx, "begin", beginLost(ctx, err))
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
// tx must run at READ COMMITTED, as BeginTx's do and the store's own: each
// statement then reads what its locks protect as committed now (an order
// key's earlier rows, a case's revision), where a snapshot taken before a
// lock wait would misread them (a row held back for good); READ
// UNCOMMITTED, which PostgreSQL runs as READ COMMITTED, is taken too. A
// transaction at REPEATABLE READ or SERIALIZABLE is refused with ErrInvalid, nothing of w
// written and tx as it was. So is one the caller began read-only (one
// read-only because the database is, a hot standby or
// default_transaction_read_only, is ErrBusy: it may take writes again). So is one whose search_path leads the store's
// table names to another schema than the store's (another tenant's store,
// with a schema per tenant), or that runs on another database of the
// server. (The statements name the tables in the store's schema, tables.go,
// so such a transaction could not reach another store's; but a caller
// whose transaction leads elsewhere has most likely confused two stores,
// and a transaction on another database would fail or, when that database
// has a schema of the store's name, land there.) A context that ends while ApplyTx runs cancels
// its statement, and tx survives rolled back to the savepoint, on a pool
// Open made (it cancels a statement on the server, not the connection); a
// pool of the caller's (New) needs the same setting,
// pgconn.CancelRequestContextWatcherHandler, or pgx closes the connection
// and tx with it.
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
	var callerNow time.Time
	if s.clock == DatabaseClock && w.Begin == nil {
		callerNow = w.Now // the frame is read as the turn is locked (lockTurnSQL)
	}
	// A Begin locks no turn: its frame is read with the savepoint.
	readClock := s.clock == DatabaseClock && w.Begin != nil && !w.Now.IsZero()
	applied, err := s.applySavepoint(ctx, tx, w, callerNow, readClock)
	if err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply", err)
	}
	return applied, nil
}

// txSeen is what savepoint reads of the caller's transaction.
type txSeen struct {
	iso, database, schema string
	// ownReadOnly: the caller began it read-only (BEGIN READ ONLY), on a
	// database that takes writes: no try of the Write in it can land.
	ownReadOnly bool
	db          time.Time // the database's clock
}

// savepoint opens ApplyTx's savepoint in tx and, in the same round trip,
// reads tx's isolation and the database's clock. made says whether the
// savepoint exists (then an error after it must be undone to it, or the
// caller's transaction stays aborted); nothing runs in tx before it, so a
// statement a context cancels never aborts the caller's transaction whole.
func savepoint(ctx context.Context, tx pgx.Tx) (made bool, seen txSeen, err error) {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT " + savepointName)
	b.Queue(`SELECT current_setting('transaction_isolation'), current_database(), (` + tablesSchemaSQL + `),
		current_setting('transaction_read_only') = 'on' AND current_setting('default_transaction_read_only') = 'off' AND NOT pg_is_in_recovery(),
		clock_timestamp()`)
	br := tx.SendBatch(ctx, b)
	if _, err = br.Exec(); err == nil {
		made = true
		err = br.QueryRow().Scan(&seen.iso, &seen.database, &seen.schema, &seen.ownReadOnly, &seen.db)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return made, seen, err
}

// applySavepoint writes w in tx under a savepoint of its own name, rolled
// back on an error, even if ctx ended, so the caller's own rows stay. The
// savepoint is named, not a pgx nested transaction: a release that a context
// ending just then kept from the server (pgx sends nothing, yet counts a
// nested transaction closed) must still be undone, or the caller's commit
// would commit a Write it was told failed.
func (s *Store) applySavepoint(ctx context.Context, tx pgx.Tx, w turnframe.Write, callerNow time.Time, readClock bool) (turnframe.Applied, error) {
	undo := func() error {
		uctx := context.WithoutCancel(ctx)
		if _, err := tx.Exec(uctx, "ROLLBACK TO SAVEPOINT "+savepointName); err != nil {
			return err
		}
		_, err := tx.Exec(uctx, "RELEASE SAVEPOINT "+savepointName)
		return err
	}
	// The caller's isolation is read with the savepoint: the store's rules
	// read what they lock at READ COMMITTED, each statement on a fresh
	// snapshot; a snapshot older than a lock (REPEATABLE READ,
	// SERIALIZABLE) misreads what the lock protects (an order key's held
	// marks, a case's revision).
	made, seen, err := savepoint(ctx, tx)
	iso, database, schema, db := seen.iso, seen.database, seen.schema, seen.db
	// PostgreSQL's READ UNCOMMITTED is READ COMMITTED by another name.
	if err == nil && iso != "read committed" && iso != "read uncommitted" {
		err = &turnframe.InvalidError{Field: "tx", Reason: "a transaction at " + iso + " isolation; ApplyTx needs read committed (BeginTx)"}
	}
	// A write refused as read-only is ErrBusy, for a database that may
	// take writes again (a hot standby, a frozen database); a transaction
	// the caller began read-only never will.
	if err == nil && seen.ownReadOnly {
		err = &turnframe.InvalidError{Field: "tx", Reason: "a read-only transaction (BEGIN READ ONLY); ApplyTx writes (BeginTx)"}
	}
	// The statements name the store's schema (tables.go), not its
	// database: a transaction on another database of the server would
	// land w in that database's schema of the same name, as if applied.
	// One whose search_path leads to another store's tables (a schema
	// per tenant) is refused as a caller that confused two stores.
	if err == nil && database != s.database {
		// Another database of the server (a database per tenant): its
		// schema may be named as the store's.
		err = &turnframe.InvalidError{Field: "tx", Reason: fmt.Sprintf("a transaction on database %s; the store's tables are in database %s", database, s.database)}
	}
	if err == nil && schema != s.schema {
		err = &turnframe.InvalidError{Field: "tx", Reason: fmt.Sprintf("a transaction whose search_path leads turnframe's tables to schema %s; "+
			"the store's are in %s (begin it with BeginTx, or set its search_path alike)", schema, s.schema)}
	}
	if err != nil {
		err = fmt.Errorf("savepoint: %w", err)
		if made {
			if rerr := undo(); rerr != nil {
				return turnframe.Applied{}, fmt.Errorf("%w (and undoing it failed: %v; roll tx back)", err, rerr)
			}
		}
		return turnframe.Applied{}, err
	}
	var f frame
	if readClock {
		f = frameOf(db, w.Now)
		w = f.writeIn(w)
	}
	wt := &wtx{q: s.on(tx), app: tx, callerNow: callerNow}
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
			return f.appliedOut(wt.frame.appliedOut(applied)), nil
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

// tablesSchemaSQL names the schemas in which the statements' unqualified
// table names resolve, by the search_path of the session it runs in: one
// schema, the store's, when the store's tables are what its statements
// reach ("(none)" for a name that resolves nowhere).
const tablesSchemaSQL = `SELECT string_agg(DISTINCT coalesce(n.nspname, '(none)'), ', ')
	FROM unnest(array['turns', 'journal', 'events', 'outbox', 'history']) AS t(name)
	LEFT JOIN pg_class AS c ON c.oid = to_regclass(t.name)
	LEFT JOIN pg_namespace AS n ON n.oid = c.relnamespace`

// savepointName is the name of the savepoint ApplyTx writes under.
const savepointName = "turnframe_apply"
