package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

// sqliteOps is the operator's store on a SQLite file: the store, and the
// reads it lacks as read-only SQL over its read pool (the schema of package
// schema), which never waits for the application's writes.
type sqliteOps struct {
	*sqlitestore.Store
}

var _ opStore = sqliteOps{}

// Name returns the file's path.
func (s sqliteOps) Name() string { return s.Path() }

func (s sqliteOps) counts(ctx context.Context) (outbox, turns map[string]int, err error) {
	if outbox, err = countInto(ctx, s.ReadDB(), "SELECT status, count(*) FROM outbox GROUP BY status"); err != nil {
		return nil, nil, err
	}
	turns, err = countInto(ctx, s.ReadDB(), "SELECT phase, count(*) FROM turns GROUP BY phase")
	return outbox, turns, err
}

// dueCondition is the claim's rule for a due row, as SQL over the outbox
// row o with ?1 the time: Pending, due, not marked held by the store, and no
// earlier row of its account and non-empty order key that HoldsOrder. It
// restates what sqlitestore's claim statement and OutboxStore.ClaimDue say,
// because the store has no read-only query for due rows; status must count
// exactly what a claim would take now, so it repeats that statement's
// condition (and TestStatus checks it on a held row).
func dueCondition() string {
	return `o.status = 'pending' AND o.due_at <= ?1 AND ` + freeCondition()
}

// heldCondition selects the pending rows whose due time came that a claim
// would not take: the ones held behind an earlier row of their order key.
func heldCondition() string {
	return `o.status = 'pending' AND o.due_at <= ?1 AND NOT (` + freeCondition() + `)`
}

// freeCondition is the half of the claim's rule about order keys.
func freeCondition() string {
	var holding []string
	for _, s := range outboxStatuses() {
		if s.HoldsOrder() {
			holding = append(holding, "'"+s.String()+"'")
		}
	}
	return `o.held = 0 AND NOT (o.order_key <> '' AND EXISTS (
		SELECT 1 FROM outbox AS p
		WHERE p.account = o.account AND p.order_key = o.order_key AND p.order_key <> ''
		  AND p.seq < o.seq AND p.status IN (` + strings.Join(holding, ", ") + `)))`
}

func (s sqliteOps) due(ctx context.Context, now time.Time) (dueSummary, error) {
	db := s.ReadDB()
	us := now.UnixMicro()
	var d dueSummary
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox AS o WHERE "+dueCondition(), us).Scan(&d.rows); err != nil {
		return d, fmt.Errorf("count due rows: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox AS o WHERE "+heldCondition(), us).Scan(&d.held); err != nil {
		return d, fmt.Errorf("count held rows: %w", err)
	}
	var id string
	var due int64
	err := db.QueryRowContext(ctx, "SELECT o.id, o.due_at FROM outbox AS o WHERE "+dueCondition()+
		" ORDER BY o.due_at, o.seq LIMIT 1", us).Scan(&id, &due)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return d, nil
	case err != nil:
		return d, fmt.Errorf("read the oldest due row: %w", err)
	}
	if d.oldest, err = turnframe.ParseOutboxID(id); err != nil {
		return d, fmt.Errorf("read the oldest due row: %w", err)
	}
	d.oldestDueAt = time.UnixMicro(due).UTC()
	return d, nil
}

// endedLeases finds the candidates by the lease index.
func (s sqliteOps) endedLeases(ctx context.Context, now time.Time, limit int) ([]turnframe.OutboxID, int, error) {
	db := s.ReadDB()
	const ended = "status = 'dispatching' AND lease_until <= ?"
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox WHERE "+ended, now.UnixMicro()).Scan(&n); err != nil {
		return nil, 0, fmt.Errorf("count ended leases: %w", err)
	}
	ids, err := queryIDs(ctx, db, turnframe.ParseOutboxID, "SELECT id FROM outbox WHERE "+ended+" ORDER BY lease_until, seq LIMIT ?",
		now.UnixMicro(), limit)
	if err != nil {
		return nil, 0, fmt.Errorf("read ended leases: %w", err)
	}
	return ids, n, nil
}

func (s sqliteOps) entriesIn(ctx context.Context, st turnframe.JournalStatus, limit int) ([]entryRef, int, error) {
	db := s.ReadDB()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM journal WHERE status = ?", st.String()).Scan(&n); err != nil {
		return nil, 0, fmt.Errorf("count %s journal entries: %w", st, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT account, key FROM journal WHERE status = ? ORDER BY updated_at, seq LIMIT ?",
		st.String(), limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s journal entries: %w", st, err)
	}
	defer rows.Close()
	var out []entryRef
	for rows.Next() {
		var account, key string
		if err := rows.Scan(&account, &key); err != nil {
			return nil, 0, fmt.Errorf("list %s journal entries: %w", st, err)
		}
		out = append(out, entryRef{account: turnframe.AccountID(account), key: turnframe.IdempotencyKey(key)})
	}
	return out, n, rows.Err()
}

func (s sqliteOps) listTurns(ctx context.Context, account turnframe.AccountID, after turnframe.TurnID, limit int) ([]turnframe.TurnPhaseMarker, error) {
	query := "SELECT id, account, conversation, phase, updated_at FROM turns WHERE id > ?"
	args := []any{""}
	if !after.IsZero() {
		args[0] = after.String()
	}
	if account != "" {
		query += " AND account = ?"
		args = append(args, string(account))
	}
	query += " ORDER BY id LIMIT ?"
	args = append(args, limit)
	rows, err := s.ReadDB().QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	defer rows.Close()
	var out []turnframe.TurnPhaseMarker
	for rows.Next() {
		var id, acct, conv, phase string
		var us int64
		if err := rows.Scan(&id, &acct, &conv, &phase, &us); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		m := turnframe.TurnPhaseMarker{Account: turnframe.AccountID(acct), UpdatedAt: time.UnixMicro(us).UTC()}
		if m.Turn, err = turnframe.ParseTurnID(id); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		if m.Conversation, err = turnframe.ParseConversationID(conv); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		if m.Phase, err = turnframe.ParseTurnPhase(phase); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func (s sqliteOps) turnAccount(ctx context.Context, turn turnframe.TurnID) (turnframe.AccountID, error) {
	var account string
	err := s.ReadDB().QueryRowContext(ctx, "SELECT account FROM turns WHERE id = ?", turn.String()).Scan(&account)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("no turn %s: %w", turn, turnframe.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("find turn %s: %w", turn, err)
	}
	return turnframe.AccountID(account), nil
}

func (s sqliteOps) turnOutbox(ctx context.Context, turn turnframe.TurnID, after turnframe.OutboxID, limit int) ([]turnframe.OutboxID, error) {
	cursor := "" // every id sorts after it
	if !after.IsZero() {
		cursor = after.String()
	}
	ids, err := queryIDs(ctx, s.ReadDB(), turnframe.ParseOutboxID, "SELECT id FROM outbox WHERE turn = ? AND id > ? ORDER BY id LIMIT ?",
		turn.String(), cursor, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox rows of turn %s: %w", turn, err)
	}
	return ids, nil
}

func (s sqliteOps) destinationCounts(ctx context.Context, n int) ([]destinationCount, error) {
	rows, err := s.ReadDB().QueryContext(ctx, `SELECT destination, status, count(*) FROM outbox
		WHERE destination IN (SELECT DISTINCT destination FROM outbox ORDER BY destination LIMIT ?)
		GROUP BY destination, status ORDER BY destination`, n)
	if err != nil {
		return nil, fmt.Errorf("count rows per destination: %w", err)
	}
	defer rows.Close()
	var out []destinationCount
	for rows.Next() {
		var c destinationCount
		if err := rows.Scan(&c.destination, &c.status, &c.rows); err != nil {
			return nil, fmt.Errorf("count rows per destination: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// outboxBefore reads the outbox's id index backwards from id.
func (s sqliteOps) outboxBefore(ctx context.Context, id turnframe.OutboxID, account turnframe.AccountID) (turnframe.OutboxID, error) {
	query, args := "SELECT id FROM outbox WHERE id < ?", []any{id.String()}
	if account != "" {
		query += " AND account = ?"
		args = append(args, string(account))
	}
	ids, err := queryIDs(ctx, s.ReadDB(), turnframe.ParseOutboxID, query+" ORDER BY id DESC LIMIT 1", args...)
	if err != nil || len(ids) == 0 {
		return turnframe.OutboxID{}, err
	}
	return ids[0], nil
}

// schemaVersion reads the version table goose keeps, as
// schema.FileVersion does once the table is known to exist (the store's
// Open checked it).
func (s sqliteOps) schemaVersion(ctx context.Context) (found, want int64, err error) {
	err = s.ReadDB().QueryRowContext(ctx, "SELECT coalesce(max(version_id), 0) FROM "+schema.VersionTable+" WHERE is_applied").Scan(&found)
	if err != nil {
		return 0, schema.Version, fmt.Errorf("read the schema version: %w", err)
	}
	return found, schema.Version, nil
}

func countInto(ctx context.Context, db *sql.DB, query string) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	defer rows.Close()
	into := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("count: %w", err)
		}
		into[name] = n
	}
	return into, rows.Err()
}

// queryIDs runs query and parses the one column of each row as an id.
func queryIDs[T any](ctx context.Context, db *sql.DB, parse func(string) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		id, err := parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
