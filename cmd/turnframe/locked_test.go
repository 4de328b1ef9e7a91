package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/sqlitestore"
	_ "modernc.org/sqlite"
)

// exclusivelyLocked makes a turnframe file and holds it as a live
// application can: one connection in locking_mode=EXCLUSIVE inside BEGIN
// EXCLUSIVE. It returns the file's path and that connection, which holds
// the lock until it is closed (a ROLLBACK alone keeps it; t's end closes
// it).
func exclusivelyLocked(t *testing.T) (string, *sql.DB) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	is.NoErr(s.Close())

	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `PRAGMA locking_mode=EXCLUSIVE`)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `BEGIN EXCLUSIVE`)
	is.NoErr(err)
	return path, db
}

// turnframe help: "Exit status: 0 done; 1 could not be done now (busy, I/O)
// ...; 2 cannot succeed as given (... not a turnframe database ...)". A live
// turnframe file another connection holds locked (locking_mode=EXCLUSIVE) is
// busy: exit 1, and not called "not a turnframe database".
func TestALockedFileIsBusyNotNotATurnframeDatabase(t *testing.T) {
	path, _ := exclusivelyLocked(t)
	for _, cmd := range []string{"status", "version", "migrate"} {
		t.Run(cmd, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, cmd, "--db", path, "--busy-timeout", "20ms")
			t.Log(stderr)
			is.Equal(code, exitFailure)                                       // busy: try again
			is.True(!strings.Contains(stderr, "is not a turnframe database")) // it is one
		})
	}
}
