package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"

	_ "modernc.org/sqlite"
)

func TestOpen(t *testing.T) {
	tests := []struct {
		name string
		opts []sqlitestore.Option
		sync int // PRAGMA synchronous on the writer: 1 NORMAL, 2 FULL
	}{
		{name: "SynchronousFullByDefault", sync: 2},
		{name: "SynchronousNormalByOption", opts: []sqlitestore.Option{sqlitestore.WithSynchronousNormal()}, sync: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, tc.opts...)

			var mode string
			is.NoErr(s.ReadDB().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
			is.Equal(mode, "wal") // journal mode

			tx, err := s.BeginTx(ctx)
			is.NoErr(err)
			defer tx.Rollback()
			var sync, fk int
			is.NoErr(tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
			is.Equal(sync, tc.sync) // synchronous on the writer
			is.NoErr(tx.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
			is.Equal(fk, 1) // foreign keys on the writer
		})
	}

	t.Run("ReadPoolRefusesWrites", func(t *testing.T) {
		is := is.New(t)
		s := mustOpen(t)
		_, err := s.ReadDB().ExecContext(context.Background(), "DELETE FROM turns")
		is.True(err != nil) // a write through the read pool
	})

	t.Run("PathIsAbsolute", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		t.Chdir(dir)
		s := mustOpenPath(t, "relative.db")
		is.Equal(s.Path(), filepath.Join(dir, "relative.db"))
	})

	t.Run("PathWithURICharacters", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "a?b#c%d.db")
		s := mustOpenPath(t, path)
		_, err := os.Stat(path)
		is.NoErr(err) // the file has the name it was given
		is.Equal(s.Path(), path)
	})

	t.Run("ErrInvalidForEmptyPath", func(t *testing.T) {
		is := is.New(t)
		_, err := sqlitestore.Open(context.Background(), "")
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
}

// Two processes opening one new file at once must both succeed and apply
// the schema once; two Stores in one process are two connections, as two
// processes would be.
func TestOpenNewFileConcurrently(t *testing.T) {
	for range 20 {
		is := is.New(t)
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "new.db")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		stores := make([]*sqlitestore.Store, 2)
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = sqlitestore.Open(ctx, path) })
		}
		wg.Wait()
		for i, err := range errs {
			is.NoErr(err) // both openers succeed
			t.Cleanup(func() { stores[i].Close() })
		}
		var n int
		is.NoErr(stores[0].ReadDB().QueryRowContext(ctx,
			"SELECT count(*) FROM goose_db_version WHERE version_id = 1").Scan(&n))
		is.Equal(n, 1) // the first migration is recorded once
	}
}

func TestOpenExisting(t *testing.T) {
	notSQLite := []byte("this is a text file, not a database\n")
	tests := []struct {
		name string
		make func(t *testing.T, path string) // nil: no file
		want error
		says string // what the error tells the operator
	}{
		{name: "MissingFileIsErrNotFound", want: turnframe.ErrNotFound},
		{name: "TextFileIsErrInvalid", want: turnframe.ErrInvalid, make: func(t *testing.T, path string) {
			if err := os.WriteFile(path, notSQLite, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "EmptyFileIsErrInvalid", want: turnframe.ErrInvalid, make: func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "CorruptSQLiteFileIsErrInvalid", want: turnframe.ErrInvalid, make: func(t *testing.T, path string) {
			b := append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 4096)...)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "SQLiteFileWithoutSchemaIsErrInvalid", want: turnframe.ErrInvalid, make: func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "DirectoryIsErrInvalid", want: turnframe.ErrInvalid, make: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "OlderSchemaIsErrInvalidAndNotMigrated", want: turnframe.ErrInvalid, says: "run `turnframe migrate`",
			make: func(t *testing.T, path string) {
				db := createAtVersion(t, path, 1)
				newV1Fixture().write(t, db)
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "NewerSchemaIsErrInvalid", want: turnframe.ErrInvalid, says: "written by a newer turnframe",
			make: makeNewerFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "store.db")
			if tc.make != nil {
				tc.make(t, path)
			}
			before := snapshotDir(t, dir)
			s, err := sqlitestore.Open(context.Background(), path, sqlitestore.WithExisting())
			if err == nil {
				s.Close()
			}
			is.True(errors.Is(err, tc.want)) // the refusal
			t.Log(err)
			if tc.says != "" {
				is.True(strings.Contains(err.Error(), tc.says)) // the error says what to do
			}
			is.Equal(snapshotDir(t, dir), before) // the directory is byte for byte unchanged
		})
	}

	t.Run("StoreOpens", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "store.db")
		first := mustOpenPath(t, path)
		mustCommit(t, first, "acme", "k1")
		is.NoErr(first.Close())
		s, err := sqlitestore.Open(context.Background(), path, sqlitestore.WithExisting())
		is.NoErr(err)
		defer s.Close()
		entry, err := s.ByKey(context.Background(), "acme", "k1")
		is.NoErr(err)
		is.Equal(entry.Status, turnframe.JournalCommitted)
	})

	// The application's own Open migrates, but never a file a newer
	// turnframe wrote: it refuses it, unchanged.
	t.Run("MigratingOpenRefusesNewerSchema", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "store.db")
		makeNewerFile(t, path)
		before := snapshotDir(t, dir)
		s, err := sqlitestore.Open(context.Background(), path)
		if err == nil {
			s.Close()
		}
		is.True(errors.Is(err, turnframe.ErrInvalid)) // the refusal
		is.True(strings.Contains(err.Error(), "written by a newer turnframe"))
		is.Equal(snapshotDir(t, dir), before) // the directory is byte for byte unchanged
	})

	t.Run("StoreInUseOpens", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "store.db")
		first := mustOpenPath(t, path)
		mustCommit(t, first, "acme", "k1")
		s, err := sqlitestore.Open(context.Background(), path, sqlitestore.WithExisting())
		is.NoErr(err)
		defer s.Close()
		_, err = s.ByKey(context.Background(), "acme", "k1")
		is.NoErr(err)
	})
}

// makeNewerFile makes at path a store file as a newer turnframe, one
// migration ahead of this build, would leave it.
func makeNewerFile(t *testing.T, path string) {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`INSERT INTO `+schema.VersionTable+` (version_id, is_applied) VALUES (?, 1)`, schema.Version+1)
	if err != nil {
		t.Fatal(err)
	}
}

// snapshotDir returns the name and content of every file in dir.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()] = "<dir>"
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// Open's doc: ErrInvalid for a file whose own tables a migration clashes
// with. Another application's table named "turns" makes migration 1 fail
// every time; that was a raw driver error, which callers (the CLI's exit
// status) took for something a retry may mend.
func TestOpenOfAFileWhoseTablesClashWithTheSchemaIsInvalid(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	_, err = db.Exec("CREATE TABLE turns (player TEXT, score INTEGER); INSERT INTO turns VALUES ('ann', 3)")
	is.NoErr(err)
	is.NoErr(db.Close())
	_, err = sqlitestore.Open(context.Background(), path)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // cannot succeed as given
	db, err = sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	defer db.Close()
	var score int
	is.NoErr(db.QueryRow("SELECT score FROM turns WHERE player = 'ann'").Scan(&score))
	is.Equal(score, 3) // the other application's row is as it was
}
