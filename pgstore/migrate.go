package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

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
	_, err := migrate(ctx, pool)
	return err
}

// migrate is Migrate, and returns the schema it migrated: the first of the
// search_path of the connection it first gets (current_schema()). Every
// step after names that schema, whichever pooled connection it runs on,
// and goose's sessions have their search_path set to that schema alone
// while goose holds them (migrationDB), so neither goose's version table nor the
// migrations' DDL can land elsewhere: another schema a pooled session was
// moved to, a temporary table of one of their names (pg_temp comes first
// otherwise).
func migrate(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	schema, err := checkSchemaExists(ctx, pool)
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	if v, err := schemaVersion(ctx, pool, schema); err == nil && v == SchemaVersion {
		return schema, nil // current: no lock to take, nothing to apply
	} else if err == nil && v == 0 {
		if err := checkNotShadowing(ctx, pool, schema); err != nil {
			return "", fmt.Errorf("migrate: %w", err)
		}
	}
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	db := migrationDB(pool, schema) // closing it leaves the pool open
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(advisoryLocker{id: migrateLockID}),
	)
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	v, err := schemaVersion(ctx, pool, schema)
	if err != nil {
		return "", fmt.Errorf("migrate: read version: %w", err)
	}
	if v != SchemaVersion {
		return "", fmt.Errorf("migrate: %w: the database's schema is at version %d, this build knows version %d; "+
			"a newer turnframe wrote it (it was left unchanged)", turnframe.ErrInvalid, v, SchemaVersion)
	}
	return schema, nil
}

// shadowedSQL names the first schema of the search_path, after schema
// ($2), that holds turnframe's version table.
const shadowedSQL = `SELECT s FROM unnest(current_schemas(false)) WITH ORDINALITY AS p(s, i)
	WHERE s <> $2 AND to_regclass(quote_ident(s) || '.' || quote_ident($1)) IS NOT NULL
	ORDER BY i LIMIT 1`

// checkNotShadowing returns ErrInvalid when schema, the first of the
// search_path, holds no turnframe schema but a later one does: creating the
// tables in the first would shadow that store with an empty one, which
// forgets every key it admitted and every row it holds. It happens when a
// schema is added in front of the one the store lives in — PostgreSQL's
// default search_path "$user", public puts the tables in public until a
// schema named after the role is created. Which schema the store uses is
// the operator's to say, in the search_path.
func checkNotShadowing(ctx context.Context, pool *pgxpool.Pool, current string) error {
	var other string
	err := pool.QueryRow(ctx, shadowedSQL, VersionTable, current).Scan(&other)
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

// checkSchemaExists returns the first schema of the connection's
// search_path that exists (current_schema()), where the store's tables
// are, or ErrInvalid when there is none, so there is nowhere to create the
// tables (PostgreSQL would only say, later, that goose's table does not
// exist), or when it is the session's temporary schema (pg_temp named
// first): a store there would be dropped with the connection, every key it
// admitted forgotten, and no other connection could read it.
// The schema is not created here: which schema an application uses, and
// who owns it, is the operator's choice.
func checkSchemaExists(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var schema *string
	var path, version string
	var versionNum int
	err := pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path'),
		current_setting('server_version'), current_setting('server_version_num')::int`).Scan(&schema, &path, &version, &versionNum)
	if err != nil {
		return "", translate(ctx, err)
	}
	if err := checkServerVersion(versionNum, version); err != nil {
		return "", err
	}
	if schema == nil {
		return "", fmt.Errorf("%w: no schema of the search_path (%s) exists; create it first (CREATE SCHEMA …) or name one that does",
			turnframe.ErrInvalid, path)
	}
	if strings.HasPrefix(*schema, "pg_temp_") {
		return "", fmt.Errorf("%w: the first schema of the search_path (%s) is the session's temporary one, pg_temp, "+
			"which is dropped with the connection; name the store's schema first (pg_temp, if named, last)", turnframe.ErrInvalid, path)
	}
	return *schema, nil
}

// minServerVersionNum is the oldest PostgreSQL pgstore runs on, as
// server_version_num: 13, whose pg_current_xact_id_if_assigned and
// pg_xact_status tell a write whose COMMIT went unanswered whether it
// landed (xact.go).
const minServerVersionNum = 130000

// checkServerVersion returns ErrInvalid for a server older than
// minServerVersionNum (num, version: its server_version_num and
// server_version), before anything is created: on it every write
// transaction of the store would fail on its first statement.
func checkServerVersion(num int, version string) error {
	if num < minServerVersionNum {
		return fmt.Errorf("%w: the server is PostgreSQL %s; pgstore needs PostgreSQL 13 or later (nothing was created)",
			turnframe.ErrInvalid, version)
	}
	return nil
}

// migrationDB returns a database/sql handle on pool for goose whose every
// session, while goose holds it, has its search_path set to schema and
// then pg_temp: goose's statements (its version table) and the
// migrations' DDL name their tables bare, and must reach schema's tables,
// not another schema a pooled session was moved to, nor a temporary table
// of one of their names (named last, pg_temp is searched last). Each
// session's own search_path is set back before it goes back to the pool,
// and the application; one that cannot be is closed instead.
func migrationDB(pool *pgxpool.Pool, schema string) *sql.DB {
	db := sql.OpenDB(pinnedConnector{Connector: stdlib.GetPoolConnector(pool), path: pgx.Identifier{schema}.Sanitize() + ", pg_temp"})
	db.SetMaxIdleConns(0) // as stdlib.OpenDBFromPool: the pool keeps the idle ones
	return db
}

// pinnedConnector is migrationDB's: a connection of the pool's, its
// search_path set to path until it is closed.
type pinnedConnector struct {
	driver.Connector
	path string
}

func (c pinnedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc := dc.(*stdlib.Conn)
	var was string
	err = sc.Conn().QueryRow(ctx, `SELECT current_setting('search_path')`).Scan(&was)
	if err == nil {
		_, err = sc.Conn().Exec(ctx, `SELECT set_config('search_path', $1, false)`, c.path)
	}
	if err != nil {
		closeSession(sc.Conn())
		_ = sc.Close()
		return nil, fmt.Errorf("set the migration's search_path: %w", err)
	}
	return &pinnedConn{Conn: sc, was: was}, nil
}

// pinnedConn is a session of pinnedConnector's: Close sets its search_path
// back to was, or closes it.
type pinnedConn struct {
	*stdlib.Conn
	was string
}

func (c *pinnedConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.Conn.Conn().PgConn().TxStatus() != 'I' {
		closeSession(c.Conn.Conn()) // the pool would close it; say so at once
	} else if _, err := c.Conn.Conn().Exec(ctx, `SELECT set_config('search_path', $1, false)`, c.was); err != nil {
		closeSession(c.Conn.Conn()) // its search_path is not the application's: the pool must not reuse it
	}
	return c.Conn.Close()
}

// closeSession closes conn, so that the pool drops it when it comes back.
func closeSession(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
