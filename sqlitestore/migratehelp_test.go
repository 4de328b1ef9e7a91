package sqlitestore_test

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"

	"github.com/matryer/is"
	"github.com/pressly/goose/v3"
	"github.com/turnframe/turnframe/schema"
)

// The checks every migration test makes of a file an earlier version wrote.

// uncertainIndexes are the indexes 00007 adds, as table.index
// (migrate7_test.go): the tests of earlier migrations, which compare a
// file's indexes before and after Open migrates it to the current version,
// expect them too, and notUncertainIndex leaves them out of the
// definitions those tests compare.
var uncertainIndexes = []string{"outbox.outbox_intervention", "outbox.outbox_unknown"}

const notUncertainIndex = `name NOT IN ('outbox_unknown', 'outbox_intervention')`

// isCurrent checks that the file behind db is at schema.Version.
func isCurrent(t *testing.T, db *sql.DB) {
	t.Helper()
	is := is.New(t)
	v, err := schema.FileVersion(context.Background(), db)
	is.NoErr(err)
	is.Equal(v, schema.Version) // at the current version
}

// isIntact checks that the file behind db passes SQLite's integrity check
// and that every foreign key finds its row.
func isIntact(t *testing.T, db *sql.DB) {
	t.Helper()
	is := is.New(t)
	is.Equal(queryStrings(t, db, `PRAGMA integrity_check`), []string{"ok"})
	is.Equal(len(queryStrings(t, db, `SELECT "table" FROM pragma_foreign_key_check`)), 0) // every row's parent exists
}

// downTo migrates the file behind db down to version with the embedded
// migrations, as goose would, and returns goose's error.
func downTo(t *testing.T, db *sql.DB, version int64) error {
	t.Helper()
	migrations, err := fs.Sub(schema.FS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations,
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(schema.VersionTable))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.DownTo(context.Background(), version)
	return err
}
