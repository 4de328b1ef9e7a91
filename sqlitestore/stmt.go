package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/turnframe/turnframe"
)

// The driver caches no statement: every ExecContext or QueryContext with a
// query string parses it again, and parsing was the largest single cost of a
// write. So every statement of the write path is prepared once, when the
// store opens, on the writer's one connection, and a write transaction runs
// it through Tx.StmtContext, which reuses the statement already prepared on
// that connection (and prepares it again, by itself, on a connection that
// replaced a broken one). Preparing must happen outside any transaction: the
// writer pool has one connection, and a transaction holds it.

// writeQueries is every statement a write transaction runs.
func writeQueries() []string {
	return append([]string{
		findTurnSQL, insertTurnSQL, messageTurnSQL, updateTurnSQL, touchTurnSQL,
		findEntrySQL, insertEntrySQL, updateEntrySQL, adoptEntrySQL, settleEntrySQL, countPendingSQL,
		caseRevisionSQL, insertEventSQL,
		insertOutboxSQL, claimSQL, findOutboxSQL, readOutboxSQL, settleOutboxSQL, updateOutboxSQL, extendSQL,
		holdSQL, letGoSQL, holdLaterSQL, expireSQL, pruneSQL,
		savepointSQL, rollbackToSavepointSQL, releaseSavepointSQL,
	}, append(historyQueries(), settleQueries()...)...)
}

// settleQueries are settleBatchSQLs, for writeQueries.
func settleQueries() []string {
	qs := make([]string, 0, len(batchSizes))
	for _, n := range batchSizes {
		qs = append(qs, settleBatchSQLs[n])
	}
	return qs
}

// prepared is the write path's statements, prepared on the writer pool.
type prepared struct {
	index map[string]int // query → its statement in stmts
	stmts []*sql.Stmt

	// unprepared counts the statements a write transaction ran from their
	// text because they were not in the set: each is a parse per call. The
	// tests check that the write path leaves it at zero.
	unprepared atomic.Int64
}

// prepare prepares queries on db. It must not run inside a transaction of
// db.
func prepare(ctx context.Context, db *sql.DB, queries []string) (*prepared, error) {
	p := &prepared{index: make(map[string]int, len(queries)), stmts: make([]*sql.Stmt, 0, len(queries))}
	for _, q := range queries {
		if _, dup := p.index[q]; dup {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("prepare %q: %w", q, translate(ctx, err)), p.close())
		}
		p.index[q] = len(p.stmts)
		p.stmts = append(p.stmts, st)
	}
	return p, nil
}

// close closes every statement.
func (p *prepared) close() error {
	var errs []error
	for _, st := range p.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// wtx is one write transaction on the writer connection. Its ExecContext,
// QueryContext and QueryRowContext take the query text, like *sql.Tx's, and
// run the prepared statement of that text when there is one.
type wtx struct {
	tx    *sql.Tx
	p     *prepared   // nil: run every query from its text
	bound []*sql.Stmt // p.stmts[i] bound to tx, once it ran without error

	history []turnframe.HistoryRecord // the records of this transaction's moves, not yet written (history.go)
}

// wrap returns tx, a transaction on the writer, as a wtx.
func (s *Store) wrap(tx *sql.Tx) *wtx {
	return &wtx{tx: tx, p: s.stmts}
}

// errForeignStmt is the text of the error Tx.StmtContext gives a statement
// of another *sql.DB (sql.Tx.StmtContext has no sentinel for it).
const errForeignStmt = "sql: Tx.Stmt: statement from different database used"

// stmt returns the statement for query bound to the transaction, and its
// index; nil if query is not prepared.
func (t *wtx) stmt(ctx context.Context, query string) (*sql.Stmt, int) {
	if t.p == nil {
		return nil, -1
	}
	i, ok := t.p.index[query]
	if !ok {
		t.p.unprepared.Add(1)
		return nil, -1
	}
	if t.bound == nil {
		t.bound = make([]*sql.Stmt, len(t.p.stmts))
	}
	if st := t.bound[i]; st != nil {
		return st, i
	}
	return t.tx.StmtContext(ctx, t.p.stmts[i]), i
}

// ran records the outcome of running st, the statement of index i. A
// statement that ran without error is bound for good and kept for the rest
// of the transaction; one that failed may carry an error of its binding (a
// context that ended), so it is bound again next time. A transaction of
// another database — ApplyTx documents that tx must come from this Store,
// but never checked it — runs every query from its text, as it always did;
// foreign reports that the caller must run this one from its text too.
func (t *wtx) ran(st *sql.Stmt, i int, err error) (foreign bool) {
	switch {
	case err == nil:
		t.bound[i] = st
	case t.bound[i] == nil && err.Error() == errForeignStmt:
		t.p, t.bound = nil, nil
		return true
	}
	return false
}

// ExecContext is tx.ExecContext, through the prepared statement of query.
func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, i := t.stmt(ctx, query); st != nil {
		res, err := st.ExecContext(ctx, args...)
		if !t.ran(st, i, err) {
			return res, err
		}
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext is tx.QueryContext, through the prepared statement of query.
func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st, i := t.stmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		if !t.ran(st, i, err) {
			return rows, err
		}
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext is tx.QueryRowContext, through the prepared statement of
// query.
func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st, i := t.stmt(ctx, query); st != nil {
		row := st.QueryRowContext(ctx, args...)
		if !t.ran(st, i, row.Err()) {
			return row
		}
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}
