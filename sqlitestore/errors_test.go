package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqlitestore.ErrBusy is the root's transient error, so a caller that
// knows only package turnframe (the Dispatcher's settlement retry) sees it.
func TestErrBusyIsTheRootSentinel(t *testing.T) {
	is := is.New(t)
	is.True(sqlitestore.ErrBusy == turnframe.ErrBusy)
}

// SQLITE_LOCKED translates like SQLITE_BUSY: ErrBusy, the driver's error
// kept in the chain.
func TestLockedIsBusy(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "locked.db"))
	is.NoErr(err)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	is.NoErr(err)
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `CREATE TABLE t (x INTEGER) STRICT; INSERT INTO t VALUES (1), (2)`)
	is.NoErr(err)
	// Dropping a table a statement of the same connection is still reading
	// is SQLITE_LOCKED ("database table is locked").
	rows, err := tx.QueryContext(ctx, `SELECT x FROM t`)
	is.NoErr(err)
	defer rows.Close()
	is.True(rows.Next())
	_, err = tx.ExecContext(ctx, `DROP TABLE t`)
	var se *sqlite.Error
	is.True(errors.As(err, &se))                         // a driver error
	is.Equal(se.Code()&0xff, int(sqlite3.SQLITE_LOCKED)) // SQLITE_LOCKED

	got := sqlitestore.Translate(ctx, err)
	is.True(errors.Is(got, turnframe.ErrBusy))                     // translated like SQLITE_BUSY
	is.True(errors.As(got, &se))                                   // the driver's error stays in the chain
	is.Equal(sqlitestore.Translate(ctx, got).Error(), got.Error()) // translating again changes nothing
}

// An App's statement its caller's context cut fails with the driver's
// "interrupted", which the App hands back as its own error: the caller gets
// the context's error, ErrAppWrite kept in the chain, as on PostgreSQL.
func TestAnAppsWriteCutByTheContextIsTheContextError(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	app := errors.Join(turnframe.ErrAppWrite, errors.New("interrupted (9)"))
	got := sqlitestore.Translate(ctx, app)
	is.True(errors.Is(got, context.Canceled))                       // the context's error
	is.True(errors.Is(got, turnframe.ErrAppWrite))                  // the app's write kept in the chain
	is.Equal(sqlitestore.Translate(context.Background(), app), app) // under a live context, the app's error as it is
}
