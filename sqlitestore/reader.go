package sqlitestore

import (
	"context"
	"database/sql"
)

// The read path's statements are prepared once, when the store opens, on
// the read pool, for the reason the write path's are (stmt.go): the driver
// parses a query text again at every call, and parsing was most of a small
// read's cost (a quarter of a turn's reads, by a profile of BenchmarkTurn).
// database/sql prepares a statement again, by itself, on each pooled
// connection that runs it first. The listings whose text depends on their
// filter (ListOutbox) run from their text; ListUnfinishedTurns's no longer
// does (its scope is parameters).

// Read queries with a fixed text.
const (
	forTurnSQL     = `SELECT ` + entryCols + ` FROM journal WHERE turn = ? AND account = ? ORDER BY seq`
	eventsByIDSQL  = `SELECT ` + eventCols + ` FROM events WHERE id IN (SELECT value FROM json_each(?)) AND account = ? ORDER BY seq`
	eventsSinceSQL = `SELECT ` + eventCols + ` FROM events WHERE account = ? AND case_key = ? AND revision > ? ORDER BY revision LIMIT ?`
	replaySQL      = `SELECT replay FROM turns WHERE id = ? AND account = ?`
)

// readQueries is every read query with a fixed text.
func readQueries() []string {
	return []string{findTurnSQL, findEntrySQL, forTurnSQL, caseRevisionSQL, eventsByIDSQL, eventsSinceSQL, replaySQL, historySQL, findOutboxSQL,
		unfinishedSQL}
}

// reader is the read pool as a querier: a query with a prepared statement
// runs it, any other runs from its text.
type reader struct {
	db *sql.DB
	p  *prepared // readQueries, prepared on db
}

// stmt returns the prepared statement of query, or nil, counting the
// queries that run from their text.
func (r reader) stmt(query string) *sql.Stmt {
	if i, ok := r.p.index[query]; ok {
		return r.p.stmts[i]
	}
	r.p.unprepared.Add(1)
	return nil
}

// ExecContext runs query from its text: the read pool is query_only, and
// no read path executes anything.
func (r reader) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.db.ExecContext(ctx, query, args...)
}

// QueryContext is db.QueryContext, through the prepared statement of query
// when there is one.
func (r reader) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

// QueryRowContext is db.QueryRowContext, through the prepared statement of
// query when there is one.
func (r reader) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}
