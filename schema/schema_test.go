package schema_test

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/schema"

	_ "modernc.org/sqlite"
)

func TestUp(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "schema.db"))
	is.NoErr(err)
	defer db.Close()

	v, err := schema.FileVersion(ctx, db)
	is.NoErr(err)
	is.Equal(v, int64(0)) // a new file has no schema

	is.NoErr(schema.Up(ctx, db)) // a new file
	is.NoErr(schema.Up(ctx, db)) // again: nothing to do

	var n int
	is.NoErr(db.QueryRowContext(ctx, "SELECT count(*) FROM "+schema.VersionTable+" WHERE version_id = 1 AND is_applied").Scan(&n))
	is.Equal(n, 1) // the first migration, recorded once
	v, err = schema.FileVersion(ctx, db)
	is.NoErr(err)
	is.Equal(v, schema.Version) // the file is at this build's version
	var strict int
	is.NoErr(db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_list WHERE strict AND name IN ('turns', 'journal', 'events', 'outbox')").Scan(&strict))
	is.Equal(strict, 4) // every table is STRICT
}

// Version is the number of the last migration FS carries, so a build never
// claims a schema it cannot make.
func TestVersionIsTheLastMigration(t *testing.T) {
	is := is.New(t)
	entries, err := fs.ReadDir(schema.FS, "migrations")
	is.NoErr(err)
	var last int64
	for i, e := range entries {
		digits, _, ok := strings.Cut(e.Name(), "_")
		is.True(ok) // NNNNN_name.sql
		n, err := strconv.ParseInt(digits, 10, 64)
		is.NoErr(err)
		is.Equal(n, int64(i+1)) // migrations are numbered 1, 2, … without a gap
		last = n
	}
	is.Equal(schema.Version, last)
}
