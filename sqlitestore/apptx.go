package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/turnframe/turnframe"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// appTx is the turnframe.Tx a Write's App function is handed: the Write's
// own transaction on the writer connection.
type appTx struct{ tx *sql.Tx }

// Backend returns "sqlite".
func (appTx) Backend() string { return "sqlite" }

// SQLTx returns the *sql.Tx behind tx, for an App function
// (turnframe.Write.App, Outcome.With) that writes the application's own
// tables in the same file: the BEGIN IMMEDIATE transaction of the Write
// (Apply's own, or the caller's under ApplyTx), which commits the app's rows
// with the journal settlement, events, outbox rows and phase move, or rolls
// them all back. false for a Tx of another store.
//
// Use it only during the App call, and never call the Store from it: the
// transaction holds the store's one writer connection, and a Store call
// from it waits for its own context to end (a write) — nothing detects it.
// Do not Commit or Rollback it: Apply does. The app's own tables are its
// business (schema, migrations); they must not be turnframe's. turnframe
// records its schema version in goose's default table, goose_db_version
// (schema.VersionTable): an app that migrates its own tables with goose in
// the same file must give goose a table of its own (goose.WithTableName),
// or the two version lists mix — Open then refuses the file as written by
// a newer turnframe, or goose skips the app's migration 1 as applied.
func SQLTx(tx turnframe.Tx) (*sql.Tx, bool) {
	a, ok := tx.(appTx)
	return a.tx, ok && a.tx != nil
}

// runApp calls w.App, if any, in tx after the Write was written into it.
// The App's error comes back wrapping turnframe.ErrAppWrite, which
// translate leaves as it is.
func runApp(ctx context.Context, tx *wtx, w turnframe.Write) error {
	if w.App == nil {
		return nil
	}
	if err := w.App(ctx, appTx{tx.tx}); err != nil {
		return fmt.Errorf("%w: %w", turnframe.ErrAppWrite, err)
	}
	return nil
}

// appCommitFailed returns err, the commit's, as turnframe.ErrAppWrite when
// w's App ran and the commit failed on a constraint: the store's own
// constraints are checked as each of its statements runs, so one checked
// at the commit is a deferred one of the app's tables (a foreign key
// DEFERRABLE INITIALLY DEFERRED). Nothing was written.
func appCommitFailed(w turnframe.Write, err error) error {
	var se *sqlite.Error
	if w.App == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
		return err
	}
	return fmt.Errorf("%w: a deferred constraint of the app's failed at the commit: %w", turnframe.ErrAppWrite, err)
}
