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
	"github.com/pressly/goose/v3"
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
	is.NoErr(db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_list WHERE strict AND name IN ('turns', 'journal', 'events', 'outbox', 'history')").Scan(&strict))
	is.Equal(strict, 5) // every table is STRICT
}

// Migration 00003 goes down to the version 2 tables and indexes when no
// entry or row needs intervention, and refuses, changing nothing, when one
// does: a Down must not lose what a person has to settle.
func TestMigration3GoesDownOnlyWithoutNeedsIntervention(t *testing.T) {
	tests := []struct {
		name   string
		status string // of the one outbox row
		down   bool
	}{
		{name: "OutcomeUnknown", status: "outcome_unknown", down: true},
		{name: "NeedsIntervention", status: "needs_intervention", down: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "down.db")+"?_pragma=foreign_keys(1)")
			is.NoErr(err)
			defer db.Close()
			is.NoErr(schema.Up(ctx, db))
			turn := strings.Repeat("1", 26)
			_, err = db.ExecContext(ctx, `INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
				VALUES (?1, 'acme', ?1, '', 'delivered', 1, 1)`, turn)
			is.NoErr(err)
			_, err = db.ExecContext(ctx, `INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status,
				attempts, due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
				VALUES (?1, 'acme', ?1, 'k', 'd', NULL, '', ?2, 1, 1, 'w', 1, '', '', 1, 1, 0)`, turn, tc.status)
			is.NoErr(err)

			migrations, err := fs.Sub(schema.FS, "migrations")
			is.NoErr(err)
			p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations,
				goose.WithDisableGlobalRegistry(true), goose.WithTableName(schema.VersionTable))
			is.NoErr(err)
			_, err = p.DownTo(ctx, 2)
			v, verr := schema.FileVersion(ctx, db)
			is.NoErr(verr)
			var def string
			is.NoErr(db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'outbox_ordered'`).Scan(&def))
			var rows int
			is.NoErr(db.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&rows))
			is.Equal(rows, 1) // the row is kept either way
			if !tc.down {
				is.True(err != nil)                                    // refused
				is.Equal(v, int64(3))                                  // left at version 3
				is.True(strings.Contains(def, "'needs_intervention'")) // with its tables
				return
			}
			is.NoErr(err)
			is.Equal(v, int64(2))                                   // down at version 2
			is.True(!strings.Contains(def, "'needs_intervention'")) // the index as 00001 made it
			var history int
			is.NoErr(db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'history'`).Scan(&history))
			is.Equal(history, 0)
			is.NoErr(schema.Up(ctx, db)) // and up again
		})
	}
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
