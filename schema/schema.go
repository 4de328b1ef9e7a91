// Package schema holds turnframe's SQLite schema as goose SQL migrations,
// embedded in the binary, and applies them.
//
// Conventions, so an operator can read the file with the sqlite3 shell:
// every table is STRICT; times are INTEGER Unix microseconds in UTC, 0 for
// no time; ids are 26-character ULID text; phases and statuses are the
// snake_case names their Go types print. Partial indexes keep the hot
// queries (claim, release, prune, recovery listing) off finished rows.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// FS holds the migrations, in migrations/NNNNN_name.sql.
//
//go:embed migrations/*.sql
var FS embed.FS

// VersionTable is the table in which goose records the applied migrations.
const VersionTable = "goose_db_version"

// Up applies every migration db does not have yet, each in its own
// transaction with its version row, and returns nil when the schema is
// current.
//
// goose takes no lock on SQLite: two processes migrating one new file at
// once can both read "version 0", and the second then fails ("table already
// exists") once the first has committed. Up does not retry; the caller, who
// knows whether another opener may race it, runs Up again, which then finds
// the migration applied.
func Up(ctx context.Context, db *sql.DB) error {
	migrations, err := fs.Sub(FS, "migrations")
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations,
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(VersionTable),
	)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("schema: up: %w", err)
	}
	return nil
}
