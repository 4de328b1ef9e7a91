package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// querier is what a helper reads or writes through: a transaction on the
// writer, or the read pool.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// micros is how a time is stored: Unix microseconds, 0 for the zero time.
// Times are always bound as int64: a time.Time would be stored as text and
// compare as text, after every integer.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros reads a stored time back: UTC, or the zero time for 0.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// stamp returns t as the store will keep it: UTC, truncated to the
// microsecond, zero for zero. Values are stamped before the rules see them,
// so what a call returns equals what a later read returns.
func stamp(t time.Time) time.Time { return fromMicros(micros(t)) }

// blob binds a byte slice so that it reads back as it went in: nil as NULL,
// empty as an empty BLOB.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// readBlob is the inverse of blob, for a scanned value.
func readBlob(v any) []byte {
	switch b := v.(type) {
	case []byte:
		if b == nil {
			return []byte{}
		}
		return append([]byte{}, b...)
	case string:
		return []byte(b)
	}
	return nil
}

func parseID[T any](what, s string, parse func(string) (T, error)) (T, error) {
	if s == "" {
		var zero T
		return zero, nil
	}
	id, err := parse(s)
	if err != nil {
		return id, fmt.Errorf("stored %s: %w", what, err)
	}
	return id, nil
}

func idText(id interface {
	IsZero() bool
	String() string
}) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

// Turns.

const turnCols = `id, account, conversation, text, phase, received_at, updated_at, message_id`

// scanTurn reads the turnCols of a row, then any extra columns into extra.
func scanTurn(sc scanner, extra ...any) (turnframe.StoredTurn, error) {
	var (
		t                 turnframe.StoredTurn
		id, conv, phase   string
		account           string
		received, updated int64
		message           sql.NullString
	)
	dest := append([]any{&id, &account, &conv, &t.Text, &phase, &received, &updated, &message}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return t, err
	}
	var err error
	if t.ID, err = parseID("turn id", id, turnframe.ParseTurnID); err != nil {
		return t, err
	}
	if t.Conversation, err = parseID("conversation id", conv, turnframe.ParseConversationID); err != nil {
		return t, err
	}
	if t.Phase, err = turnframe.ParseTurnPhase(phase); err != nil {
		return t, fmt.Errorf("stored phase: %w", err)
	}
	t.Account, t.MessageID = turnframe.AccountID(account), turnframe.MessageID(message.String)
	t.ReceivedAt, t.UpdatedAt = fromMicros(received), fromMicros(updated)
	return t, nil
}

// messageArg is a turn's message_id column: NULL for a turn received
// without one, so turns_message leaves it out.
func messageArg(id turnframe.MessageID) any {
	if id == "" {
		return nil
	}
	return string(id)
}

func marker(t turnframe.StoredTurn) turnframe.TurnPhaseMarker {
	return turnframe.TurnPhaseMarker{Account: t.Account, Turn: t.ID, Conversation: t.Conversation, Phase: t.Phase, UpdatedAt: t.UpdatedAt}
}

// Journal entries.

const entryCols = `account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids, code, remote_ref,
	admitted_at, updated_at, lease_until, needs_approval`

// entryArgs returns the values of e's entryCols, in their order.

func entryArgs(e turnframe.JournalEntry) ([]any, error) {
	ids := make([]string, len(e.EventIDs))
	for i, id := range e.EventIDs {
		ids[i] = id.String()
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	return []any{
		string(e.Account), string(e.Key), e.Turn.String(), string(e.Case), e.Name, blob(e.Payload),
		e.Status.String(), idText(e.Attempt), e.Attempts, string(idsJSON), e.Code, e.RemoteRef,
		micros(e.AdmittedAt), micros(e.UpdatedAt), micros(e.LeaseUntil), e.NeedsApproval,
	}, nil
}

func scanEntry(sc scanner) (turnframe.JournalEntry, error) {
	var (
		e                                        turnframe.JournalEntry
		account, key, turn, caseKey, status, att string
		idsJSON                                  string
		payload                                  any
		admitted, updated, lease                 int64
	)
	err := sc.Scan(&account, &key, &turn, &caseKey, &e.Name, &payload, &status, &att, &e.Attempts,
		&idsJSON, &e.Code, &e.RemoteRef, &admitted, &updated, &lease, &e.NeedsApproval)
	if err != nil {
		return e, err
	}
	e.Account, e.Key, e.Case = turnframe.AccountID(account), turnframe.IdempotencyKey(key), turnframe.CaseKey(caseKey)
	e.Payload = readBlob(payload)
	if e.Turn, err = parseID("turn id", turn, turnframe.ParseTurnID); err != nil {
		return e, err
	}
	if e.Attempt, err = parseID("attempt id", att, turnframe.ParseAttemptID); err != nil {
		return e, err
	}
	if e.Status, err = turnframe.ParseJournalStatus(status); err != nil {
		return e, fmt.Errorf("stored journal status: %w", err)
	}
	var ids []string
	if err := json.Unmarshal([]byte(idsJSON), &ids); err != nil {
		return e, fmt.Errorf("stored event ids: %w", err)
	}
	for _, s := range ids {
		id, err := parseID("event id", s, turnframe.ParseEventID)
		if err != nil {
			return e, err
		}
		e.EventIDs = append(e.EventIDs, id)
	}
	e.AdmittedAt, e.UpdatedAt, e.LeaseUntil = fromMicros(admitted), fromMicros(updated), fromMicros(lease)
	return e, nil
}

// Events.

const eventCols = `id, account, case_key, revision, turn, key, type, data, at`

func scanEvent(sc scanner) (turnframe.StoredEvent, error) {
	var (
		ev                         turnframe.StoredEvent
		id, account, caseKey, turn string
		key                        string
		rev, at                    int64
		data                       any
	)
	if err := sc.Scan(&id, &account, &caseKey, &rev, &turn, &key, &ev.Type, &data, &at); err != nil {
		return ev, err
	}
	var err error
	if ev.ID, err = parseID("event id", id, turnframe.ParseEventID); err != nil {
		return ev, err
	}
	if ev.Turn, err = parseID("turn id", turn, turnframe.ParseTurnID); err != nil {
		return ev, err
	}
	ev.Account, ev.Case, ev.Key = turnframe.AccountID(account), turnframe.CaseKey(caseKey), turnframe.IdempotencyKey(key)
	ev.Revision = turnframe.CaseRevision(rev)
	ev.Data = readBlob(data)
	ev.At = fromMicros(at)
	return ev, nil
}

// Outbox rows.

const outboxCols = `seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
	claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, lease_until, attempt_base,
	trace_context`

// outboxRow is an outbox record and its enqueue sequence number.
type outboxRow struct {
	seq int64
	rec turnframe.OutboxRecord
}

func scanOutbox(sc scanner) (outboxRow, error) {
	var (
		row                                 outboxRow
		id, account, turn, key, status      string
		payload                             any
		due, claimed, created, updated, fin int64
		lease                               int64
	)
	r := &row.rec
	err := sc.Scan(&row.seq, &id, &account, &turn, &key, &r.Destination, &payload, &r.OrderKey, &status,
		&r.Attempts, &due, &r.ClaimedBy, &claimed, &r.LastCode, &r.RemoteRef, &created, &updated, &fin,
		&lease, &r.AttemptBase, &r.TraceContext)
	if err != nil {
		return row, err
	}
	if r.ID, err = parseID("outbox id", id, turnframe.ParseOutboxID); err != nil {
		return row, err
	}
	if r.Turn, err = parseID("turn id", turn, turnframe.ParseTurnID); err != nil {
		return row, err
	}
	if r.Status, err = turnframe.ParseOutboxStatus(status); err != nil {
		return row, fmt.Errorf("stored outbox status: %w", err)
	}
	r.Account, r.Key = turnframe.AccountID(account), turnframe.IdempotencyKey(key)
	r.Payload = readBlob(payload)
	r.DueAt, r.ClaimedAt, r.CreatedAt = fromMicros(due), fromMicros(claimed), fromMicros(created)
	r.UpdatedAt, r.FinishedAt, r.LeaseUntil = fromMicros(updated), fromMicros(fin), fromMicros(lease)
	return row, nil
}

// scanOutboxRows reads every row of rows and closes it.
func scanOutboxRows(rows *sql.Rows, err error) ([]outboxRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		r, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
