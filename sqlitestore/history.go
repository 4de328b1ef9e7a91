package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/turnframe/turnframe"
)

// The audit trail. Every write transaction that moves a journal entry, an
// outbox row or a turn's phase queues the record of each move on its wtx
// (record), built by the root helpers (storekit.EntryHistory, RowHistory,
// PhaseHistory) from the values the rules returned, and writes the queue
// just before it commits (flushHistory): a transaction that fails writes no
// record, and one that commits writes every record of its moves.
//
// The table is a rowid table, seq its rowid, with one index on the subject
// (history_subject: account, ref, kind, and the rowid at its end): an
// append to the table's last page and one index entry per record. (A
// WITHOUT ROWID table keyed by subject and seq, with seq from a counter
// row, measured the same: as many pages per commit, as much CPU.) The
// driver's cost of a statement and of each bound parameter is of the order
// of SQLite's own insert, so records are written several per statement,
// and a batch of records that share what one operation gives all of them
// (a claim, a group of settlements, an expiry) binds those values once.
// Either statement inserts its rows in the order of its VALUES list, so
// seq follows the order of the queue (TestHistoryBatches).

const historyCols = `kind, account, ref, from_status, to_status, evidence, attempt, actor, code, remote_ref, note, at`

// historyArity is the number of historyCols.
const historyArity = 12

// batchSizes are the sizes of the statements prepared to write several
// rows at once (history records, settlements), largest first: n rows are
// written as n's binary digits, at most five statements for up to 31 rows.
var batchSizes = [...]int{16, 8, 4, 2, 1}

// batchSize returns the largest of batchSizes that is at most n (n ≥ 1).
func batchSize(n int) int {
	for _, size := range batchSizes {
		if size <= n {
			return size
		}
	}
	return 1
}

// insertHistorySQL returns the INSERT of n history records, each with its
// own values.
func insertHistorySQL(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", historyArity), ", ") + ")"
	return `INSERT INTO history (` + historyCols + `) VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// historySharedArity is how many values insertSharedHistorySQL binds once
// for all its records (sharedArgs), and historyOwnArity how many it binds
// per record (ownArgs).
const historySharedArity, historyOwnArity = 6, 6

// insertSharedHistorySQL returns the INSERT of n history records that share
// their kind, from and to statuses, evidence, actor and note: bound once,
// first (sharedArgs), then ownArgs of each record. Every parameter is a
// plain ?: the driver looks a numbered one (?7) up by its name, at a cost
// that grows with the number of parameters.
func insertSharedHistorySQL(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", historyOwnArity), ", ") + ")"
	// v.column1 … column6: account, ref, attempt, code, remote_ref, at
	return `INSERT INTO history (` + historyCols + `)
	SELECT s.kind, v.column1, v.column2, s.from_status, s.to_status, s.evidence, v.column3, s.actor, v.column4,
		v.column5, s.note, v.column6
	FROM (SELECT ? AS kind, ? AS from_status, ? AS to_status, ? AS evidence, ? AS actor, ? AS note) AS s,
		(VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + `) AS v`
}

// insertHistorySQLs and insertSharedHistorySQLs are the prepared
// statements' texts, by batch size.
var insertHistorySQLs, insertSharedHistorySQLs = func() (map[int]string, map[int]string) {
	own, shared := make(map[int]string, len(batchSizes)), make(map[int]string, len(batchSizes))
	for _, n := range batchSizes {
		own[n], shared[n] = insertHistorySQL(n), insertSharedHistorySQL(n)
	}
	return own, shared
}()

// historyQueries are the history statements of the write path, for
// writeQueries.
func historyQueries() []string {
	qs := []string{entryStatusSQL, rowStatusSQL, turnPhaseSQL, storedReplaySQL, pruneHistorySQL}
	for _, n := range batchSizes {
		qs = append(qs, insertHistorySQLs[n])
		if n > 1 {
			qs = append(qs, insertSharedHistorySQLs[n])
		}
	}
	return qs
}

// record queues the records of moves this transaction made, in the order
// made; flushHistory writes them.
func (t *wtx) record(recs ...turnframe.HistoryRecord) {
	t.history = append(t.history, recs...)
}

// flushHistory writes the queued records, in order, and empties the queue.
// Each record's seq is the table's next rowid, so seq follows the order of
// the queue and of the transactions.
func (t *wtx) flushHistory(ctx context.Context) error {
	recs := t.history
	t.history = t.history[:0]
	var args []any
	for len(recs) > 0 {
		n := batchSize(len(recs))
		query := insertHistorySQLs[n]
		args = args[:0]
		if n > 1 && shareValues(recs[:n]) {
			query = insertSharedHistorySQLs[n]
			args = sharedArgs(args, recs[0])
			for _, r := range recs[:n] {
				args = ownArgs(args, r)
			}
		} else {
			for _, r := range recs[:n] {
				args = historyArgs(args, r)
			}
		}
		if _, err := t.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("history: %w", translate(ctx, err))
		}
		recs = recs[n:]
	}
	return nil
}

// shareValues reports whether recs share the values sharedArgs binds.
func shareValues(recs []turnframe.HistoryRecord) bool {
	first := recs[0]
	for _, r := range recs[1:] {
		if r.Kind != first.Kind || r.From != first.From || r.To != first.To || r.Evidence != first.Evidence ||
			r.Actor != first.Actor || r.Note != first.Note {
			return false
		}
	}
	return true
}

// sharedArgs appends the values insertSharedHistorySQL binds once: kind,
// from, to, evidence, actor, note.
func sharedArgs(args []any, r turnframe.HistoryRecord) []any {
	return append(args, r.Kind.String(), r.From, r.To, evidence(r), string(r.Actor), r.Note)
}

// ownArgs appends the values insertSharedHistorySQL binds for each record:
// account, ref, attempt, code, remote_ref, at.
func ownArgs(args []any, r turnframe.HistoryRecord) []any {
	return append(args, string(r.Account), r.Ref, r.Attempt, r.Code, r.RemoteRef, micros(r.At))
}

// evidence is how the table keeps HistoryRecord.Evidence: 1 or 0.
func evidence(r turnframe.HistoryRecord) int64 {
	if r.Evidence {
		return 1
	}
	return 0
}

// historyArgs appends the values of r's historyCols, in their order.
func historyArgs(args []any, r turnframe.HistoryRecord) []any {
	return append(args, r.Kind.String(), string(r.Account), r.Ref, r.From, r.To, evidence(r), r.Attempt,
		string(r.Actor), r.Code, r.RemoteRef, r.Note, micros(r.At))
}

func scanHistory(sc scanner) (turnframe.HistoryRecord, error) {
	var (
		r                    turnframe.HistoryRecord
		kind, account, actor string
		evidence             int
		at                   int64
	)
	err := sc.Scan(&r.Seq, &kind, &account, &r.Ref, &r.From, &r.To, &evidence, &r.Attempt, &actor,
		&r.Code, &r.RemoteRef, &r.Note, &at)
	if err != nil {
		return r, err
	}
	if r.Kind, err = turnframe.ParseSubjectKind(kind); err != nil {
		return r, fmt.Errorf("stored subject kind: %w", err)
	}
	r.Account, r.Actor, r.Evidence, r.At = turnframe.AccountID(account), turnframe.Actor(actor), evidence == 1, fromMicros(at)
	return r, nil
}

// canonicalRef returns the reference under which the store files subject's
// records: a journal key as it is, an outbox row's or a turn's id in its
// canonical text (ids parse in either case); false for a reference that is
// not an id where one is needed, which names nothing this store holds.
func canonicalRef(subject turnframe.Subject) (string, bool) {
	var (
		canon string
		err   error
	)
	switch subject.Kind {
	case turnframe.SubjectOutbox:
		var id turnframe.OutboxID
		id, err = turnframe.ParseOutboxID(subject.Ref)
		canon = id.String()
	case turnframe.SubjectTurn:
		var id turnframe.TurnID
		id, err = turnframe.ParseTurnID(subject.Ref)
		canon = id.String()
	default:
		canon = subject.Ref
	}
	return canon, err == nil
}

// historySQL reads one subject's records after a seq through
// history_subject, whose last column is the rowid (seq): a range of one
// index, already in seq order.
const historySQL = `SELECT seq, ` + historyCols + ` FROM history
	WHERE account = ? AND ref = ? AND kind = ? AND seq > ? ORDER BY seq LIMIT ?`

// History returns at most limit records of subject with a seq above after,
// oldest first; none, and no error, for a subject without history or of
// another account. ErrInvalid for a bad subject (turnframe.Subject.Validate)
// or a limit outside 1–MaxLimit.
func (s *Store) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	if err := subject.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	done, err := s.enter("history")
	if err != nil {
		return nil, err
	}
	defer done()
	ref, ok := canonicalRef(subject)
	if !ok {
		return nil, nil
	}
	rows, err := s.reads.QueryContext(ctx, historySQL, string(subject.Account), ref, subject.Kind.String(), after, limit)
	if err != nil {
		return nil, s.fail(ctx, "history", err)
	}
	defer rows.Close()
	var out []turnframe.HistoryRecord
	for rows.Next() {
		r, err := scanHistory(rows)
		if err != nil {
			return nil, s.fail(ctx, "history", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "history", err)
	}
	return out, nil
}

// The statements that read a subject's status as it is, for RecordEvidence.
const (
	entryStatusSQL = `SELECT status FROM journal WHERE account = ? AND key = ?`
	rowStatusSQL   = `SELECT status FROM outbox WHERE id = ? AND account = ?`
	turnPhaseSQL   = `SELECT phase FROM turns WHERE id = ? AND account = ?`
)

// RecordEvidence appends rec as evidence that moves nothing: the store sets
// From and To to the subject's status as it is (a turn's phase), and
// Evidence, in one transaction with the read. ErrInvalid for a bad record
// (turnframe.HistoryRecord.Validate, From and To aside, which the store
// sets); ErrNotFound for a subject that does not exist for its account (an
// outbox row of another account included).
func (s *Store) RecordEvidence(ctx context.Context, rec turnframe.HistoryRecord) error {
	check := rec
	check.From, check.To = "-", "-" // the store's to set, not the caller's to get right
	if err := check.Validate(); err != nil {
		return err
	}
	rec.At = stamp(rec.At)
	return s.inTx(ctx, "record evidence", func(tx *wtx) error {
		ref, ok := canonicalRef(rec.Subject)
		if !ok {
			return fmt.Errorf("%v %q of %q: %w", rec.Kind, rec.Ref, rec.Account, turnframe.ErrNotFound)
		}
		status, err := subjectStatus(ctx, tx, rec.Kind, rec.Account, ref)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%v %q of %q: %w", rec.Kind, rec.Ref, rec.Account, turnframe.ErrNotFound)
		}
		if err != nil {
			return translate(ctx, err)
		}
		rec.Ref = ref
		rec.From, rec.To, rec.Evidence = status, status, true
		tx.record(rec)
		return nil
	})
}

// subjectStatus returns the name of the status (a turn's phase) of the
// subject of kind, account and ref as stored, checked against its Go type;
// sql.ErrNoRows when there is none.
func subjectStatus(ctx context.Context, tx *wtx, kind turnframe.SubjectKind, account turnframe.AccountID, ref string) (string, error) {
	var (
		query string
		args  []any
		parse func(string) (string, error)
	)
	switch kind {
	case turnframe.SubjectJournal:
		query, args = entryStatusSQL, []any{string(account), ref}
		parse = func(v string) (string, error) { st, err := turnframe.ParseJournalStatus(v); return st.String(), err }
	case turnframe.SubjectOutbox:
		query, args = rowStatusSQL, []any{ref, string(account)}
		parse = func(v string) (string, error) { st, err := turnframe.ParseOutboxStatus(v); return st.String(), err }
	default:
		query, args = turnPhaseSQL, []any{ref, string(account)}
		parse = func(v string) (string, error) { p, err := turnframe.ParseTurnPhase(v); return p.String(), err }
	}
	var stored string
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&stored); err != nil {
		return "", err
	}
	status, err := parse(stored)
	if err != nil {
		return "", fmt.Errorf("stored %v status: %w", kind, err)
	}
	return status, nil
}

// storedReplaySQL reads a turn's replay record, for the abandon code of its
// move to Abandoned when the Write carries no record of its own.
const storedReplaySQL = `SELECT replay FROM turns WHERE id = ?`

// pruneHistorySQL deletes the history of the rows pruneSQL is about to
// delete: the same rows (prunableRows, through outbox_finished), each
// found in history_subject by its subject.
const pruneHistorySQL = `DELETE FROM history
	WHERE kind = 'outbox' AND (account, ref) IN (SELECT account, id ` + prunableRows + `)`
