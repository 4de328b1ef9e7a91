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

// An extended SQLITE_BUSY code is SQLITE_BUSY: ErrBusy, the driver's error
// kept in the chain. SQLITE_BUSY_SNAPSHOT is the one a test can produce on
// demand: a read transaction whose snapshot another connection's commit
// made stale tries to write.
func TestExtendedBusyIsBusy(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "busy.db")+"?_pragma=journal_mode(WAL)")
	is.NoErr(err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (x INTEGER) STRICT; INSERT INTO t VALUES (1)`)
	is.NoErr(err)
	reader, err := db.BeginTx(ctx, nil) // deferred: a read snapshot first
	is.NoErr(err)
	defer reader.Rollback()
	var n int
	is.NoErr(reader.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n))
	_, err = db.ExecContext(ctx, `INSERT INTO t VALUES (2)`) // another connection commits
	is.NoErr(err)
	_, err = reader.ExecContext(ctx, `INSERT INTO t VALUES (3)`) // the stale snapshot cannot write
	var se *sqlite.Error
	is.True(errors.As(err, &se))                           // a driver error
	is.Equal(se.Code(), int(sqlite3.SQLITE_BUSY_SNAPSHOT)) // an extended busy code
	got := sqlitestore.Translate(ctx, err)
	is.True(errors.Is(got, turnframe.ErrBusy)) // translated like SQLITE_BUSY
	is.True(errors.As(got, &se))               // the driver's error stays in the chain
}
