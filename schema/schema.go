// Package schema holds turnframe's SQLite schema as goose SQL migrations,
// embedded in the binary, and applies them.
//
// Conventions, so an operator can read the file with the sqlite3 shell:
// every table is STRICT; times are INTEGER Unix microseconds in UTC, 0 for
// no time; ids are 26-character ULID text; phases and statuses are the
// snake_case names their Go types print. Partial indexes keep the hot
// queries (claim, expiry, prune, recovery listing) off finished rows. The
// table history is the audit trail: one row per move of a journal entry,
// an outbox row or a turn's phase, in seq order.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// FS holds the migrations, in migrations/NNNNN_name.sql.
//
//go:embed migrations/*.sql
var FS embed.FS

// VersionTable is the table in which goose records the applied migrations.
const VersionTable = "goose_db_version"

// Version is the schema version this build of turnframe reads and writes:
// the number of the last migration in FS. A file at another version is
// opened only by migrating it (Up), and only forward.
const Version int64 = 7

// Querier is what FileVersion reads through: a *sql.DB, *sql.Conn or
// *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// FileVersion returns the schema version of the file behind q: the highest
// migration goose recorded as applied there, 0 for a file without
// VersionTable (no turnframe schema) or with no migration applied. It only
// reads; its error is the driver's.
func FileVersion(ctx context.Context, q Querier) (int64, error) {
	var tables int
	err := q.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", VersionTable).Scan(&tables)
	if err != nil || tables == 0 {
		return 0, err
	}
	var v int64
	err = q.QueryRowContext(ctx,
		"SELECT coalesce(max(version_id), 0) FROM "+VersionTable+" WHERE is_applied").Scan(&v)
	return v, err
}

// Up applies every migration db does not have yet, each in its own
// transaction with its version row, and returns nil when the schema is
// current. A crash leaves the file at the last migration that committed;
// the next Up goes on from there. Up never goes down: a file of a newer
// turnframe (FileVersion above Version) is left as it is, and the caller
// refuses it.
//
// goose takes no lock on SQLite, and creates its version table after
// checking, outside any transaction, that it is missing: two processes
// migrating one new file at once both see it missing, and the loser waits
// out goose's retry (a constant second). Up therefore creates that table
// itself first, with goose's own statements, in a BEGIN IMMEDIATE
// transaction that checks again once it holds the write lock.
//
// A migration can still race: both openers read "version 0", and the
// second fails ("table already exists") once the first has committed. Up
// does not retry; the caller, who knows whether another opener may race
// it, runs Up again, which then finds the migration applied.
func Up(ctx context.Context, db *sql.DB) error {
	return UpTo(ctx, db, Version)
}

// UpTo is Up that stops at version: a file as a turnframe of that schema
// version left it, for tests and tools that must make one (a migration is
// proven on a file its predecessor wrote). A version above Version applies
// every migration this build has.
func UpTo(ctx context.Context, db *sql.DB, version int64) error {
	migrations, err := fs.Sub(FS, "migrations")
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if err := ensureVersionTable(ctx, db); err != nil {
		return fmt.Errorf("schema: version table: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations,
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(VersionTable),
	)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("schema: up to %d: %w", version, err)
	}
	return nil
}

// ensureVersionTable creates goose's version table, with its version 0 row,
// unless it exists; the check and the creation are one BEGIN IMMEDIATE
// transaction, so two processes cannot both create it.
func ensureVersionTable(ctx context.Context, db *sql.DB) (err error) {
	store, err := database.NewStore(database.DialectSQLite3, VersionTable)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Look first without a transaction: a file that has the table (every
	// file but a new one) is opened without waiting for the write lock, so
	// an operator tool opens it while the application holds a write.
	if exists, err := versionTableExists(ctx, conn); err != nil || exists {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	exists, err := versionTableExists(ctx, conn)
	if err != nil {
		return err
	}
	if !exists {
		if err := store.CreateVersionTable(ctx, conn); err != nil {
			return err
		}
		if err := store.Insert(ctx, conn, database.InsertRequest{Version: 0}); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

func versionTableExists(ctx context.Context, conn *sql.Conn) (bool, error) {
	var n int
	err := conn.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", VersionTable).Scan(&n)
	return n > 0, err
}
