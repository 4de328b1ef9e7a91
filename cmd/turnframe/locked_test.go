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

// turnframe help: "Exit status: 0 done; 1 could not be done now (busy, I/O)
// ...; 2 cannot succeed as given (... not a turnframe database ...)". A live
// turnframe file another connection holds locked (locking_mode=EXCLUSIVE) is
// busy: exit 1, and not called "not a turnframe database".
func TestALockedFileIsBusyNotNotATurnframeDatabase(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	is.NoErr(s.Close())

	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `PRAGMA locking_mode=EXCLUSIVE`)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `BEGIN EXCLUSIVE`)
	is.NoErr(err)
	defer db.ExecContext(ctx, `ROLLBACK`)

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
