package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// An existing file another connection locks is busy, not foreign.
// errors.go: "Every error a turnframe call returns wraps at most one of them";
// ErrBusy: "the store could not take the call now, because another writer
// ... held it for longer than the store waits ... the same call may be tried
// again". An existing turnframe file another connection holds locked
// (locking_mode=EXCLUSIVE, as a backup tool or sqlite3 shell may) is busy,
// not "not a turnframe store".
func TestOpenOfALockedFileIsBusyNotInvalid(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "turnframe.db")
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

	for _, tc := range []struct {
		name string
		opts []sqlitestore.Option
	}{
		{"existing", []sqlitestore.Option{sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(20 * time.Millisecond)}},
		{"default", []sqlitestore.Option{sqlitestore.WithBusyTimeout(20 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := sqlitestore.Open(ctx, path, tc.opts...)
			t.Logf("err: %v", err)
			is.True(errors.Is(err, turnframe.ErrBusy))     // try again later
			is.True(!errors.Is(err, turnframe.ErrInvalid)) // "wraps at most one": not also "not a turnframe store"
		})
	}
}
