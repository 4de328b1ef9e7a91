package schema_test

import (
	"context"
	"database/sql"
	"path/filepath"
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

	is.NoErr(schema.Up(ctx, db)) // a new file
	is.NoErr(schema.Up(ctx, db)) // again: nothing to do

	var n int
	is.NoErr(db.QueryRowContext(ctx, "SELECT count(*) FROM "+schema.VersionTable+" WHERE version_id = 1 AND is_applied").Scan(&n))
	is.Equal(n, 1) // the first migration, recorded once
	var strict int
	is.NoErr(db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_list WHERE strict AND name IN ('turns', 'journal', 'events', 'outbox')").Scan(&strict))
	is.Equal(strict, 4) // every table is STRICT
}
