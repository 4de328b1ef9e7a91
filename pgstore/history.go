package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
)

// The audit trail. Every write transaction that moves a journal entry, an
// outbox row or a turn's phase queues the record of each move on its wtx
// (record), built by the root helpers (storekit.EntryHistory, RowHistory,
// PhaseHistory) from the values the rules returned, and writes the queue
// just before it commits (flushHistory), in one statement: a transaction
// that fails writes no record, and one that commits writes every record of
// its moves. Each move is made under the lock of its subject's row, so a
// subject's records get increasing seqs in the order of its moves.

const historyCols = `kind, account, ref, from_status, to_status, evidence, attempt, actor, code, remote_ref, note, at`

// insertHistorySQL inserts one record per element of its twelve arrays, in
// the arrays' order (WITH ORDINALITY), so seq follows the queue.
const insertHistorySQL = `INSERT INTO history (` + historyCols + `)
	SELECT kind, account, ref, from_status, to_status, evidence, attempt, actor, code, remote_ref, note, at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[])
		WITH ORDINALITY AS r(kind, account, ref, from_status, to_status, evidence, attempt, actor, code, remote_ref, note, at, i)
	ORDER BY i`

// record queues the records of moves this transaction made, in the order
// made; flushHistory writes them.
func (t *wtx) record(recs ...turnframe.HistoryRecord) {
	t.history = append(t.history, recs...)
}

// flushHistory queues the statement that writes the queued records, in
// order (batch.go: it is sent with the next statement, at the latest the
// COMMIT), and empties the queue of records.
func (t *wtx) flushHistory(ctx context.Context) error {
	recs := t.history
	t.history = nil
	if len(recs) == 0 {
		return nil
	}
	n := len(recs)
	var (
		kind, account, ref, from, to, attempt = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		actor, code, remote, note             = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		evidence                              = make([]bool, n)
		at                                    = make([]int64, n)
	)
	for i, r := range recs {
		kind[i], account[i], ref[i], from[i], to[i] = r.Kind.String(), string(r.Account), r.Ref, r.From, r.To
		evidence[i], attempt[i], actor[i], code[i] = r.Evidence, r.Attempt, string(r.Actor), r.Code
		remote[i], note[i], at[i] = r.RemoteRef, r.Note, micros(r.At)
	}
	t.queue(wrapf("history"), insertHistorySQL, kind, account, ref, from, to, evidence, attempt, actor, code, remote, note, at)
	return nil
}

func scanHistory(sc scanner) (turnframe.HistoryRecord, error) {
	var (
		r                    turnframe.HistoryRecord
		kind, account, actor string
		at                   int64
	)
	err := sc.Scan(&r.Seq, &kind, &account, &r.Ref, &r.From, &r.To, &r.Evidence, &r.Attempt, &actor,
		&r.Code, &r.RemoteRef, &r.Note, &at)
	if err != nil {
		return r, err
	}
	if r.Kind, err = turnframe.ParseSubjectKind(kind); err != nil {
		return r, fmt.Errorf("stored subject kind: %w", err)
	}
	r.Account, r.Actor, r.At = turnframe.AccountID(account), turnframe.Actor(actor), fromMicros(at)
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

// historySQL reads one subject's records after a seq: a range of
// history_subject, already in seq order.
const historySQL = `SELECT seq, ` + historyCols + ` FROM history
	WHERE account = $1 AND ref = $2 AND kind = $3 AND seq > $4 ORDER BY seq LIMIT $5`

// History returns at most limit records of subject with a seq above after,
// oldest first; none, and no error, for a subject without history or of
// another account. ErrInvalid for a bad subject (turnframe.Subject.Validate)
// or a limit outside 1–MaxLimit.
func (s *Store) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	f, err := s.frame(ctx, "history")
	if err != nil {
		return nil, err
	}
	recs, err := s.dbHistory(ctx, subject, after, limit)
	return f.historyOut(recs), err
}

// dbHistory is History on times in the store's frame (frame.go).
func (s *Store) dbHistory(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
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
	rows, err := s.db.Query(ctx, historySQL, string(subject.Account), ref, subject.Kind.String(), after, limit)
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

// The statements that read and lock a subject's status as it is, for
// RecordEvidence: the lock keeps a move of the subject from landing between
// the read and the record.
const (
	entryStatusSQL = `SELECT status FROM journal WHERE account = $1 AND key = $2 FOR UPDATE`
	rowStatusSQL   = `SELECT status FROM outbox WHERE id = $1 AND account = $2 FOR UPDATE`
	turnPhaseSQL   = `SELECT phase FROM turns WHERE id = $1 AND account = $2 FOR UPDATE`
)

// RecordEvidence appends rec as evidence that moves nothing: the store sets
// From and To to the subject's status as it is (a turn's phase), and
// Evidence, in one transaction with the read, which locks the subject's row.
// ErrInvalid for a bad record (turnframe.HistoryRecord.Validate, From and To
// aside, which the store sets); ErrNotFound for a subject that does not
// exist for its account (an outbox row of another account included).
func (s *Store) RecordEvidence(ctx context.Context, rec turnframe.HistoryRecord) error {
	f, err := s.frameAt(ctx, s.pool, "record evidence", rec.At)
	if err != nil {
		return err
	}
	rec.At = f.in(rec.At)
	return s.dbRecordEvidence(ctx, rec)
}

// dbRecordEvidence is RecordEvidence on times in the store's frame (frame.go).
func (s *Store) dbRecordEvidence(ctx context.Context, rec turnframe.HistoryRecord) error {
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
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%v %q of %q: %w", rec.Kind, rec.Ref, rec.Account, turnframe.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rec.Ref = ref
		rec.From, rec.To, rec.Evidence = status, status, true
		tx.record(rec)
		return nil
	})
}

// subjectStatus returns the name of the status (a turn's phase) of the
// subject of kind, account and ref as stored, checked against its Go type,
// and locks its row; pgx.ErrNoRows when there is none.
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
	if err := tx.QueryRow(ctx, query, args...).Scan(&stored); err != nil {
		return "", err
	}
	status, err := parse(stored)
	if err != nil {
		return "", fmt.Errorf("stored %v status: %w", kind, err)
	}
	return status, nil
}
