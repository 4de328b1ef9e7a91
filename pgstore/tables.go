package pgstore

import (
	"context"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The store's statements name its tables by the schema they are in (the
// store's: current_schema() of the pool's connections when New ran), never
// through the session's search_path. A pool of the application's (New) is
// shared with its own statements, and an App's run on the store's own
// transaction: a session that an application left with its search_path
// moved (SET search_path TO tenant_b, without LOCAL, for its own tables) or
// with a temporary table of one of the store's table names (PostgreSQL
// looks in pg_temp first) would otherwise lead every later call of the
// store on that pooled connection to other tables — another tenant's store,
// or a table gone with the session — and a key admitted before is admitted
// again as new (I14), a row enqueued where no dispatcher looks.
//
// The statements are written with the bare names, for reading; inSchema
// qualifies them as they are sent, at no cost in round trips.

// tableRef matches a reference to one of the store's tables: after FROM,
// INTO, UPDATE or JOIN, the only places its statements name one.
var tableRef = regexp.MustCompile(`\b(FROM|INTO|UPDATE|JOIN)(\s+)(turns|journal|events|outbox|history)\b`)

// qualifier returns what rewrites a statement's table references into
// schema, and caches the statements it rewrote (the store sends a bounded
// set: its constants, and the few a filter combines).
func qualifier(schema string) func(string) string {
	repl := "${1}${2}" + strings.ReplaceAll(pgx.Identifier{schema}.Sanitize(), "$", "$$") + ".${3}"
	var cache sync.Map
	return func(sql string) string {
		if q, ok := cache.Load(sql); ok {
			return q.(string)
		}
		q := tableRef.ReplaceAllString(sql, repl)
		cache.Store(sql, q)
		return q
	}
}

// inSchema is a batcher whose statements reach the store's tables, whatever
// the session's search_path or temporary tables.
type inSchema struct {
	q       batcher
	qualify func(string) string
}

func (i inSchema) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return i.q.Exec(ctx, i.qualify(sql), args...)
}

func (i inSchema) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return i.q.Query(ctx, i.qualify(sql), args...)
}

func (i inSchema) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return i.q.QueryRow(ctx, i.qualify(sql), args...)
}

func (i inSchema) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, qq := range b.QueuedQueries {
		qq.SQL = i.qualify(qq.SQL)
	}
	return i.q.SendBatch(ctx, b)
}

// on returns q with the store's statements qualified.
func (s *Store) on(q batcher) inSchema { return inSchema{q: q, qualify: s.qualify} }
