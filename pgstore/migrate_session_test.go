package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// New migrates on a pool of the application's, whose connections carry
// what the application left on them; goose's statements (its version
// table) and the migrations' DDL named their tables bare, so PostgreSQL
// looked in pg_temp first. A temporary table of the application's named
// like one of them on the session that migrates took the migration's
// statements in place of the store's schema:
//
//   - a scratch table named outbox took the migration's indexes on
//     outbox, the unique key among them: the store's own outbox was left
//     without them, and the store came up on a schema that is not the one
//     this build wrote (a second row of an (account, key) is no longer
//     ErrConflict);
//   - a table named like goose's version table, its rows copied from
//     another store's (a report, a schema diff), made goose read every
//     migration as applied: New succeeded on a schema with no tables.
//
// The migration must land in the store's schema, whatever the session
// holds, and DatabaseVersion (which names the schema) must say it is
// current.
func TestMigrateLandsInTheStoresSchemaWhateverTheSessionHolds(t *testing.T) {
	tests := []struct {
		name string
		temp func(other string) string // the app's temporary table, given another store's schema
	}{
		{"a temporary table named outbox", func(string) string {
			return `CREATE TEMP TABLE outbox (seq bigint, account text, key text, order_key text, status text,
				held boolean, due_at bigint, finished_at bigint, lease_until bigint)`
		}},
		{"a temporary table named like goose's", func(other string) string {
			return `CREATE TEMP TABLE ` + pgstore.VersionTable + ` AS SELECT * FROM ` + other + `.` + pgstore.VersionTable
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			other := pgtest.Schema(t)
			mustOpenURL(t, other) // a store elsewhere on the database, current
			u := pgtest.Schema(t)
			pool, err := pgxpool.New(ctx, pgtest.WithParams(t, u, url.Values{"pool_max_conns": {"1"}}))
			is.NoErr(err)
			defer pool.Close()
			_, err = pool.Exec(ctx, tt.temp(schemaOf(t, other)))
			is.NoErr(err) // the app's temporary table, kept with the session

			s, err := pgstore.New(ctx, pool, pgstore.WithClock(pgstore.CallerClock))
			is.NoErr(err)
			defer s.Close()
			var path string
			is.NoErr(pool.QueryRow(ctx, `SHOW search_path`).Scan(&path))
			is.Equal(path, schemaOf(t, u)) // the app's session has its own search_path back

			check, err := pgxpool.New(ctx, u) // sessions of their own: no temporary table
			is.NoErr(err)
			defer check.Close()
			v, err := pgstore.DatabaseVersion(ctx, check)
			is.NoErr(err)
			is.Equal(v, pgstore.SchemaVersion) // the store's schema is current
			var unique bool
			err = check.QueryRow(ctx, `SELECT coalesce(bool_or(indisunique), false) FROM pg_index
				WHERE indrelid = to_regclass(current_schema() || '.outbox') AND indexrelid = to_regclass(current_schema() || '.outbox_key')`).Scan(&unique)
			is.NoErr(err)
			is.True(unique)                                                                                                             // the store's outbox has its unique key
			is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay-1", base, turnframe.OutboxMessage{Destination: "d"})) // and it works
		})
	}
}

// The store's tables are in the first schema of the search_path
// (current_schema()); with pg_temp named first (the "secure search_path"
// advice put at the wrong end) that is the session's temporary schema.
// Open created the whole store there: every table dropped when the
// connection closes, every key it admitted forgotten (I14), its rows gone,
// and on the pool's other connections a schema they cannot read. Open must
// refuse, as it refuses a path naming no schema that exists.
func TestOpenRefusesToPutTheStoreInTheTemporarySchema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t)
	schema := schemaOf(t, u)
	_, err := pgstore.Open(ctx, pgtest.WithParams(t, u, url.Values{"search_path": {"pg_temp," + schema}}))
	t.Logf("open: %v", err)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // refused
	is.True(strings.Contains(err.Error(), "pg_temp"))
	conn, err := pgx.Connect(ctx, u)
	is.NoErr(err)
	defer conn.Close(ctx)
	var tables int
	is.NoErr(conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'turns' AND (schemaname LIKE 'pg\_temp\_%' OR schemaname = $1)`, schema).Scan(&tables))
	is.Equal(tables, 0) // nothing created
}
