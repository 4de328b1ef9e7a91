package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/turnframe/turnframe"
)

// migrations holds the schema as goose SQL files, one per step, in
// migrations/NNNNN_name.sql.
//
//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable is the table, in the first schema of the connection's
// search_path, in which goose records the applied migrations.
const VersionTable = "turnframe_goose_version"

// SchemaVersion is the schema version this build reads and writes: the
// number of the last migration.
const SchemaVersion int64 = 7

// migrateLockID is the advisory lock (a session lock, database-wide) that
// Migrate holds while goose migrates (advisoryLocker), so that processes
// starting at once apply each migration once.
const migrateLockID int64 = 0x7475726e6672616d // "turnfram"

// Migrate applies every migration the database (the first schema of the
// pool's search_path) does not have yet, each in its own transaction with
// its version row, under an advisory lock, so several processes may call it
// at once: one migrates, the others wait for it in the server (each wait
// bounded by the connection's lock_timeout and statement_timeout, begun
// again while ctx lasts).
// A database already at SchemaVersion is only read: its version, and no
// lock, so processes that start together do not queue for one another.
// A crash leaves the schema at the last migration that committed.
// It never goes down: a database at a version above SchemaVersion (a newer
// turnframe wrote it) is refused with an error, wrapping
// turnframe.ErrInvalid when goose itself does not refuse it first. Open and
// New call it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := checkSchemaExists(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if v, err := DatabaseVersion(ctx, pool); err == nil && v == SchemaVersion {
		return nil // current: no lock to take, nothing to apply
	} else if err == nil && v == 0 {
		if err := checkNotShadowing(ctx, pool); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool) // closing it leaves the pool open
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(advisoryLocker{id: migrateLockID}),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if v != SchemaVersion {
		return fmt.Errorf("migrate: %w: the database's schema is at version %d, this build knows version %d; "+
			"a newer turnframe wrote it (it was left unchanged)", turnframe.ErrInvalid, v, SchemaVersion)
	}
	return nil
}

// shadowedSQL names the first schema of the search_path, after the current
// one, that holds turnframe's version table, and the current one.
const shadowedSQL = `SELECT s, current_schema() FROM unnest(current_schemas(false)) WITH ORDINALITY AS p(s, i)
	WHERE s <> current_schema() AND to_regclass(quote_ident(s) || '.' || quote_ident($1)) IS NOT NULL
	ORDER BY i LIMIT 1`

// checkNotShadowing returns ErrInvalid when the first schema of the
// search_path holds no turnframe schema but a later one does: creating the
// tables in the first would shadow that store with an empty one, which
// forgets every key it admitted and every row it holds. It happens when a
// schema is added in front of the one the store lives in — PostgreSQL's
// default search_path "$user", public puts the tables in public until a
// schema named after the role is created. Which schema the store uses is
// the operator's to say, in the search_path.
func checkNotShadowing(ctx context.Context, pool *pgxpool.Pool) error {
	var other, current string
	err := pool.QueryRow(ctx, shadowedSQL, VersionTable).Scan(&other, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(ctx, err)
	}
	return fmt.Errorf("%w: schema %q, first on the search_path, holds no turnframe schema, but schema %q after it does: "+
		"creating one in %q would hide that store's rows and keys; put %q first in the search_path to use it, "+
		"or name only %q to begin a new store there", turnframe.ErrInvalid, current, other, current, other, current)
}

// checkSchemaExists returns ErrInvalid when the connection's search_path
// names no schema that exists, so there is nowhere to create the tables:
// PostgreSQL would only say, later, that goose's table does not exist.
// The schema is not created here: which schema an application uses, and
// who owns it, is the operator's choice.
func checkSchemaExists(ctx context.Context, pool *pgxpool.Pool) error {
	var schema *string
	var path string
	if err := pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &path); err != nil {
		return translate(ctx, err)
	}
	if schema == nil {
		return fmt.Errorf("%w: no schema of the search_path (%s) exists; create it first (CREATE SCHEMA …) or name one that does",
			turnframe.ErrInvalid, path)
	}
	return nil
}
