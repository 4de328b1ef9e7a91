package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// Apply validates w (ErrInvalid, before any transaction starts) and writes
// it in one transaction, or writes nothing and returns the error:
// ErrNotFound for a turn that does not exist for the account (or an entry to
// settle that is not the turn's), ErrConflict for a refused transition
// (storekit.NextEntry, NextPhase), a moved revision, a key reused for a
// different command, an outbox row whose key the account's rows already hold
// (the unique index outbox_key), a Begin of a turn id that exists, or a
// message id that began a turn with another message; ErrBusy when a
// deadlock or serialization failure outlasted the retries; ErrClosed after
// Close. A refused Advance is no error: the turn stays where it was
// (storekit.AdvancePhase) and Applied.Phase says so.
//
// A Begin whose message id the account received already writes nothing and
// returns that turn in Applied.Redelivered (storekit.CheckRedelivery);
// deliveries racing with one id are arbitrated by the INSERT of the turn
// (ON CONFLICT on turns_message): one begins the turn, every other waits for
// its commit and is the redelivery. An entry storekit.Readmit adopts is
// moved to w's turn after the entries it admitted before. Every move w makes
// is recorded in the audit trail, as w.Actor with w.Note, in the same
// transaction.
//
// w.App, if any, runs last in the same transaction (PgxTx gives it the
// pgx.Tx), after every check passed, and at most once: a transaction that
// called it is never retried. Its error rolls all of w back, its rows
// included, and is returned wrapping turnframe.ErrAppWrite. A crash before
// the commit leaves nothing of w, the app's rows included; after it, all of
// w.
func (s *Store) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	if s.clock == DatabaseClock && w.Begin == nil {
		// The frame is read as the turn is locked (lockTurnSQL).
		return s.dbApply(ctx, w, w.Now)
	}
	f, err := s.frameAt(ctx, s.pool, "apply", w.Now)
	if err != nil {
		return turnframe.Applied{}, err
	}
	applied, err := s.dbApply(ctx, f.writeIn(w), time.Time{})
	return f.appliedOut(applied), err
}

// dbApply is Apply on times in the store's frame (frame.go); or, with a
// callerNow that is not zero, on the caller's times, moved into the frame
// the transaction reads as it locks the turn (wtx.callerNow), and back.
func (s *Store) dbApply(ctx context.Context, w turnframe.Write, callerNow time.Time) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	var (
		applied turnframe.Applied
		f       frame
	)
	err := s.inTxFor(ctx, "apply", w.App != nil, func(tx *wtx) error {
		tx.callerNow = callerNow
		var err error
		applied, err = s.applyAndNotify(ctx, tx, w)
		f = tx.frame
		return err
	})
	if err != nil {
		return turnframe.Applied{}, err
	}
	s.notifyEnqueued(applied)
	return f.appliedOut(applied), nil
}

// The statements of Apply.
const (
	// insertTurnSQL begins a turn. Its arbiter is turns_message alone: a
	// message id received already inserts nothing (and, while the turn it
	// began is not committed, or a move of that turn is open, waits for
	// that transaction's end), while a turn id that exists fails on the
	// primary key (ErrConflict).
	insertTurnSQL = `INSERT INTO turns (` + turnCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (account, message_id) WHERE message_id IS NOT NULL DO NOTHING`
	// messageTurnSQL finds the turn a message id began, by turns_message.
	messageTurnSQL = `SELECT ` + turnCols + ` FROM turns WHERE account = $1 AND message_id = $2`
	// lockTurnSQL reads the turn a Write changes and locks it: the Writes
	// of one turn run one at a time. It also reads the database's clock
	// at the statement's start, before any wait for the lock: the frame of
	// a Write whose caller's now is known (wtx.callerNow).
	lockTurnSQL = `SELECT ` + turnCols + `, statement_timestamp() FROM turns WHERE id = $1 AND account = $2 FOR UPDATE`
	// updateTurnSQL keeps the stored replay record when the new one is NULL.
	updateTurnSQL = `UPDATE turns SET phase = $1, updated_at = $2, replay = coalesce($3, replay) WHERE id = $4`

	// insertEntrySQL admits a key, unless the account used it already (the
	// unique constraint is the arbiter: a key admitted by a transaction not
	// yet committed waits for it).
	insertEntrySQL = `INSERT INTO journal (` + entryCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		ON CONFLICT (account, key) DO NOTHING`
	// lockEntrySQL reads an entry and locks it, for a rule that moves it.
	lockEntrySQL = `SELECT ` + entryCols + ` FROM journal WHERE account = $1 AND key = $2 FOR UPDATE`
	// entrySetSQL writes every column of an entry but its account and key
	// ($1, $2 of entryArgs, the WHERE clause).
	entrySetSQL = `turn = $3, case_key = $4, name = $5, payload = $6, status = $7, attempt = $8, attempts = $9,
		event_ids = $10, code = $11, remote_ref = $12, admitted_at = $13, updated_at = $14, lease_until = $15,
		needs_approval = $16 WHERE account = $1 AND key = $2`
	updateEntrySQL = `UPDATE journal SET ` + entrySetSQL
	// adoptEntrySQL is updateEntrySQL that also gives the entry the next
	// admission sequence number: a turn that adopts an entry lists it after
	// the entries it admitted before.
	adoptEntrySQL = `UPDATE journal SET seq = DEFAULT, ` + entrySetSQL
	// countPendingSQL counts the turn's entries that IsPending, through the
	// partial index journal_pending, whose condition it repeats.
	countPendingSQL = `SELECT count(*) FROM journal WHERE turn = $1 AND status IN ('pending', 'executing')`

	insertEventSQL = `INSERT INTO events (` + eventCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	// insertOutboxSQL enqueues a row, held when an active row of its
	// account and order key exists. The enqueuer holds the key's advisory
	// lock, so every such row was enqueued before it (a smaller seq): the
	// probe is turnframe's rule for a new row. A key the account's rows
	// hold already fails on outbox_key: ErrConflict.
	insertOutboxSQL = `INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status, attempts,
		due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, lease_until,
		attempt_base, trace_context, held)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
			$7 <> '' AND EXISTS (SELECT 1 FROM outbox AS p WHERE p.account = $2 AND p.order_key = $7
				AND p.order_key <> '' AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention')))`
)

// apply writes a validated w into tx, in the order Write documents.
func (s *Store) apply(ctx context.Context, tx *wtx, w turnframe.Write) (turnframe.Applied, error) {
	var applied turnframe.Applied
	w = stampWrite(w)

	turn, earlier, err := beginOrLockTurn(ctx, tx, w)
	if err != nil || earlier != nil {
		applied.Redelivered = earlier
		return applied, err
	}
	if !tx.callerNow.IsZero() {
		// The frame was read as the turn was locked: w moves into it.
		w = stampWrite(tx.frame.writeIn(w))
		if err := w.Validate(); err != nil {
			return applied, err
		}
	}
	if w.Begin != nil {
		tx.record(storekit.PhaseHistory(w.Account, w.Turn, turnframe.PhaseUnset, turn.Phase, w.Actor, "", w.Now))
	}
	// stored is the turn's phase before this Write moves it: the phase the
	// journal rules (Readmit, NextEntry) read.
	stored := turn.Phase
	if err := storekit.CheckExpectedPhase(stored, w.ExpectPhase); err != nil {
		return applied, err
	}

	if len(w.Admit) > 0 {
		if err := storekit.CheckAdmit(turn.Phase); err != nil {
			return applied, err
		}
	}
	for _, cmd := range w.Admit {
		e, earlier, err := admit(ctx, tx, w, stored, cmd)
		if err != nil {
			return applied, err
		}
		applied.Admitted = append(applied.Admitted, e)
		applied.Earlier = append(applied.Earlier, earlier)
	}

	// The events belong to the one settlement to Committed (Validate checked
	// that there is exactly one when there are events or outbox rows);
	// NextEntry records their ids on its entry, so they are numbered first,
	// under the locks of their cases.
	var committing turnframe.IdempotencyKey
	for _, st := range w.Settle {
		if st.To == turnframe.JournalCommitted {
			committing = st.Key
		}
	}
	if err := lockCases(ctx, tx, w); err != nil {
		return applied, err
	}
	revs, first, err := readAhead(ctx, tx, w)
	if err != nil {
		return applied, err
	}
	events := s.numberEvents(w, committing, revs)

	for i, st := range w.Settle {
		var evs []turnframe.StoredEvent
		if st.To == turnframe.JournalCommitted {
			evs = events
		}
		var read *lockedEntry
		if i == 0 {
			read = first
		}
		e, err := settleEntry(ctx, tx, w, stored, st, evs, read)
		if err != nil {
			return applied, err
		}
		applied.Settled = append(applied.Settled, e)
	}

	// Expect is checked against the revisions before this Write's events,
	// which are not inserted yet.
	for c, want := range w.Expect {
		got, known := revisionBefore(events, c)
		if !known {
			if got, err = caseRevision(ctx, tx, w.Account, c); err != nil {
				return applied, err
			}
		}
		if got != want {
			return applied, fmt.Errorf("%w: case %q is at revision %d, not %d", turnframe.ErrConflict, c, got, want)
		}
	}

	for _, ev := range events {
		tx.queue(wrapf("event %v", ev.ID), insertEventSQL, ev.ID.String(), string(ev.Account), string(ev.Case),
			int64(ev.Revision), ev.Turn.String(), string(ev.Key), ev.Type, ev.Data, micros(ev.At))
	}
	applied.Events = events

	if applied.Outbox, err = s.enqueue(ctx, tx, w, committing); err != nil {
		return applied, err
	}

	if err := moveTurn(ctx, tx, w, &turn, stored); err != nil {
		return applied, err
	}
	applied.Phase = turn.Phase
	if err := tx.flushHistory(ctx); err != nil {
		return applied, err
	}
	return applied, runApp(ctx, tx, w)
}

// beginOrLockTurn creates the turn of a Begin, or locks and loads the turn
// the Write changes (ErrNotFound if it does not exist for the account). For
// a Begin whose message id began a turn already it returns that turn as
// earlier (nil error: the same message, storekit.CheckRedelivery) or
// ErrConflict; a Begin of a turn id that exists is ErrConflict.
func beginOrLockTurn(ctx context.Context, tx *wtx, w turnframe.Write) (turn turnframe.StoredTurn, earlier *turnframe.StoredTurn, err error) {
	if w.Begin == nil {
		var db time.Time
		turn, err = scanTurn(tx.QueryRow(ctx, lockTurnSQL, w.Turn.String(), string(w.Account)), &db)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("turn %v: %w", w.Turn, turnframe.ErrNotFound)
		}
		if err == nil && !tx.callerNow.IsZero() {
			tx.frame = frameOf(db, tx.callerNow)
		}
		return turn, nil, err
	}
	t := *w.Begin
	t.Phase = turnframe.PhaseReceived
	if t.ReceivedAt.IsZero() {
		t.ReceivedAt = w.Now
	}
	t.UpdatedAt = w.Now
	tag, err := tx.Exec(ctx, insertTurnSQL,
		t.ID.String(), string(t.Account), t.Conversation.String(), t.Text, t.Phase.String(),
		micros(t.ReceivedAt), micros(t.UpdatedAt), messageArg(t.MessageID))
	if err != nil {
		return t, nil, fmt.Errorf("begin turn %v: %w", t.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return t, nil, nil
	}
	// The message id began a turn already: read the winner as last
	// committed (the INSERT waited for any open write of its row), without
	// a lock, since a redelivery writes nothing, and judge the delivery.
	found, err := scanTurn(tx.QueryRow(ctx, messageTurnSQL, string(w.Account), string(t.MessageID)))
	if err != nil {
		return t, nil, fmt.Errorf("message %q: %w", t.MessageID, err)
	}
	if err := storekit.CheckRedelivery(found, t); err != nil {
		return t, nil, err
	}
	return found, &found, nil
}

// moveTurn applies w's Phase or Advance to turn, whose phase before the
// Write was stored, records a move, and writes the turn's row (its phase,
// update time and replay record).
func moveTurn(ctx context.Context, tx *wtx, w turnframe.Write, turn *turnframe.StoredTurn, stored turnframe.TurnPhase) error {
	switch {
	case w.Phase != turnframe.PhaseUnset:
		pending, err := pendingAfter(ctx, tx, w.Turn, turn.Phase, w.Phase)
		if err != nil {
			return err
		}
		if err := turnframe.NextPhase(turn.Phase, w.Phase, pending); err != nil {
			return err
		}
		turn.Phase = w.Phase
	case w.Advance != turnframe.PhaseUnset:
		pending, err := pendingAfter(ctx, tx, w.Turn, turn.Phase, w.Advance)
		if err != nil {
			return err
		}
		turn.Phase = storekit.AdvancePhase(turn.Phase, w.Advance, pending)
	}
	var replay *string // NULL keeps the stored record
	if w.Replay != nil {
		b, err := json.Marshal(w.Replay)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		text := string(b)
		replay = &text
	}
	if turn.Phase != stored {
		code, err := abandonCode(ctx, tx, w, turn.Phase)
		if err != nil {
			return err
		}
		tx.record(storekit.PhaseHistory(w.Account, w.Turn, stored, turn.Phase, w.Actor, code, w.Now))
	}
	if turn.Phase == stored && replay == nil && turn.UpdatedAt.Equal(w.Now) {
		return nil // the row holds all of it already
	}
	tx.queue(wrapf("update turn"), updateTurnSQL, turn.Phase.String(), micros(w.Now), replay, w.Turn.String())
	return nil
}

// storedReplaySQL reads a turn's replay record, for the abandon code of its
// move to Abandoned when the Write carries no record of its own.
const storedReplaySQL = `SELECT replay FROM turns WHERE id = $1`

// abandonCode is the code the audit trail gives w's move of its turn to
// phase: the abandon code of the turn's replay record as w leaves it (w's
// own, or else the one stored) for a move to Abandoned; else none.
func abandonCode(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase) (string, error) {
	switch {
	case phase != turnframe.PhaseAbandoned:
		return "", nil
	case w.Replay != nil:
		return w.Replay.AbandonCode, nil
	}
	var text *string
	if err := tx.QueryRow(ctx, storedReplaySQL, w.Turn.String()).Scan(&text); err != nil {
		return "", fmt.Errorf("replay of turn %v: %w", w.Turn, err)
	}
	if text == nil {
		return "", nil
	}
	var r turnframe.ReplayRecord
	if err := json.Unmarshal([]byte(*text), &r); err != nil {
		return "", fmt.Errorf("stored replay record of turn %v: %w", w.Turn, err)
	}
	return r.AbandonCode, nil
}

// stampWrite puts w's times in the form the store keeps them.
func stampWrite(w turnframe.Write) turnframe.Write {
	w.Now = stamp(w.Now)
	if w.Begin != nil {
		b := *w.Begin
		b.ReceivedAt = stamp(b.ReceivedAt)
		w.Begin = &b
	}
	if len(w.Outbox) > 0 {
		out := make([]turnframe.OutboxMessage, len(w.Outbox))
		for i, m := range w.Outbox {
			m.NotBefore = stamp(m.NotBefore)
			out[i] = m
		}
		w.Outbox = out
	}
	return w
}

// admit returns the entry for cmd, admitted into w's turn, whose phase is
// phase: a new Pending one, or, for a key the account used already, what
// storekit.Readmit makes of the entry it admitted, locked. earlier is that
// entry as it was found (Applied.Earlier), zero for a new one.
func admit(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase, cmd turnframe.Command) (entry, earlier turnframe.JournalEntry, err error) {
	if !w.RepeatOnly { // a repeat never inserts: the key must be there
		e := storekit.NewEntry(w.Account, w.Turn, cmd, w.Now)
		tag, err := tx.Exec(ctx, insertEntrySQL, entryArgs(e)...)
		if err != nil {
			return e, earlier, fmt.Errorf("admit %q: %w", cmd.Key, err)
		}
		if tag.RowsAffected() == 1 {
			tx.record(storekit.EntryHistory(turnframe.JournalEntry{}, e, w.Actor, w.Note, w.Now))
			return e, earlier, nil
		}
	}
	existing, err := lockEntry(ctx, tx, w.Account, cmd.Key)
	if errors.Is(err, turnframe.ErrNotFound) {
		return existing, earlier, storekit.CheckRepeat(w, cmd.Key, false, false)
	}
	if err != nil {
		return existing, earlier, err
	}
	entry, err = readmit(ctx, tx, w, phase, existing, cmd)
	return entry, existing, err
}

// lockEntry reads the entry under key and locks it. ErrNotFound if the
// account never used key.
func lockEntry(ctx context.Context, tx *wtx, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	return scanLockedEntry(tx.QueryRow(ctx, lockEntrySQL, string(account), string(key)), key)
}

// scanLockedEntry scans the row of lockEntrySQL for key.
func scanLockedEntry(row pgx.Row, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := scanEntry(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("key %q: %w", key, turnframe.ErrNotFound)
	}
	return e, err
}

// lockedEntry is what lockEntry returned, read ahead (readAhead).
type lockedEntry struct {
	e   turnframe.JournalEntry
	err error
}

// readAhead reads, in one round trip with the statements queued before
// them, what the Write reads next, in the order it would read it alone:
// the revision of each case w's events name (under the cases' locks), in
// the order of first mention, then the entry of w's first settlement,
// locked. Nothing runs between these statements, and the entry read is the
// next statement settleEntry would send, so the server sees what it saw
// when each went alone. The entry's error (ErrNotFound) is kept for
// settleEntry, where the Write met it; first is nil when w settles
// nothing.
func readAhead(ctx context.Context, tx *wtx, w turnframe.Write) (revs map[turnframe.CaseKey]turnframe.CaseRevision, first *lockedEntry, err error) {
	revs = make(map[turnframe.CaseKey]turnframe.CaseRevision)
	var reads []read
	for _, ev := range w.Events {
		if _, ok := revs[ev.Case]; ok {
			continue
		}
		revs[ev.Case] = 0
		c := ev.Case
		reads = append(reads, read{sql: caseRevisionSQL, args: []any{string(w.Account), string(c)}, scan: func(row pgx.Row) error {
			var rev int64
			if err := row.Scan(&rev); err != nil {
				return fmt.Errorf("revision of case %q: %w", c, err)
			}
			revs[c] = turnframe.CaseRevision(rev)
			return nil
		}})
	}
	if len(w.Settle) > 0 {
		first = &lockedEntry{}
		key := w.Settle[0].Key
		reads = append(reads, read{sql: lockEntrySQL, args: []any{string(w.Account), string(key)}, scan: func(row pgx.Row) error {
			first.e, first.err = scanLockedEntry(row, key)
			return nil
		}})
	}
	return revs, first, tx.readAll(ctx, reads)
}

// readmit applies storekit.Readmit to existing, the entry cmd's key
// admitted (locked), reading the phase of its turn (phase, when that is w's
// turn). An entry the rule adopts is stored moved to w's turn, with the next
// admission sequence number; any other stands as it is. The owner's phase is
// read without a lock: an abandoned turn stays abandoned, and a turn
// abandoned after this read is abandoned after this Write.
func readmit(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase, existing turnframe.JournalEntry, cmd turnframe.Command) (turnframe.JournalEntry, error) {
	if existing.Turn != w.Turn {
		owner, err := findTurn(ctx, tx, w.Account, existing.Turn)
		if err != nil {
			return existing, fmt.Errorf("turn of entry %q: %w", cmd.Key, err)
		}
		phase = owner.Phase
	}
	entry, adopt, err := storekit.Readmit(existing, phase, cmd, w.Turn, w.Now)
	if err != nil || !adopt {
		return entry, err
	}
	if err := storekit.CheckRepeat(w, cmd.Key, true, true); err != nil {
		return existing, err
	}
	tx.queue(wrapf("adopt %q", cmd.Key), adoptEntrySQL, entryArgs(entry)...)
	return entry, nil
}

// settleEntry moves the turn's entry by NextEntry, for a turn whose phase
// as stored is phase, as w.Actor, stores the result and records the move
// (none for a lease renewal). The entry is locked first: by read, when
// readAhead locked it, or else here.
func settleEntry(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase, st turnframe.Settlement, events []turnframe.StoredEvent, read *lockedEntry) (turnframe.JournalEntry, error) {
	if read == nil {
		read = &lockedEntry{}
		read.e, read.err = lockEntry(ctx, tx, w.Account, st.Key)
	}
	e, err := read.e, read.err
	if err != nil {
		return e, err
	}
	if e.Turn != w.Turn {
		return e, fmt.Errorf("entry %q of turn %v: %w", st.Key, w.Turn, turnframe.ErrNotFound)
	}
	next, err := storekit.NextEntry(e, st, events, phase, w.Actor, w.Now)
	if err != nil {
		return e, err
	}
	// The lease is now + a duration: kept, like every time, to the
	// microsecond, so what Apply returns is what a read returns.
	next.LeaseUntil = stamp(next.LeaseUntil)
	tx.queue(wrapf("settle %q", st.Key), updateEntrySQL, entryArgs(next)...)
	if storekit.EntryMoved(e, next) { // a lease renewal moves nothing the trail records
		tx.record(storekit.EntryHistory(e, next, w.Actor, w.Note, w.Now))
	}
	return next, nil
}

// revisionBefore returns the stored revision of case c, the one before the
// first of events on c, when events has one.
func revisionBefore(events []turnframe.StoredEvent, c turnframe.CaseKey) (turnframe.CaseRevision, bool) {
	for _, ev := range events {
		if ev.Case == c {
			return ev.Revision - 1, true
		}
	}
	return 0, false
}

// numberEvents gives each event of w its id, its case's next revision
// after revs (each case's revision as stored, read under the case's lock:
// readAhead) and the committing command's key.
func (s *Store) numberEvents(w turnframe.Write, key turnframe.IdempotencyKey, revs map[turnframe.CaseKey]turnframe.CaseRevision) []turnframe.StoredEvent {
	if len(w.Events) == 0 {
		return nil
	}
	next := maps.Clone(revs)
	events := make([]turnframe.StoredEvent, 0, len(w.Events))
	for _, ev := range w.Events {
		rev := next[ev.Case] + 1
		next[ev.Case] = rev
		ev.Data = bytes.Clone(ev.Data) // nil stays nil (NULL), empty stays empty
		events = append(events, turnframe.StoredEvent{
			ID: s.ids.EventID(w.Now), Account: w.Account, Turn: w.Turn, Key: key,
			Revision: rev, Event: ev, At: w.Now,
		})
	}
	return events
}

// enqueue inserts w's outbox rows, under the advisory locks of their order
// keys, and records each.
func (s *Store) enqueue(ctx context.Context, tx *wtx, w turnframe.Write, committing turnframe.IdempotencyKey) ([]turnframe.OutboxEntry, error) {
	if len(w.Outbox) == 0 {
		return nil, nil
	}
	var keys []int64
	for _, m := range w.Outbox {
		if m.OrderKey != "" {
			keys = append(keys, lockKey(lockOrder, w.Account, m.OrderKey))
		}
	}
	if err := lockAll(ctx, tx, keys); err != nil {
		return nil, err
	}
	out := make([]turnframe.OutboxEntry, 0, len(w.Outbox))
	for i, m := range w.Outbox {
		r := storekit.NewOutboxRecord(s.ids.OutboxID(w.Now), w.Account, w.Turn, committing, i, len(w.Outbox), m, w.Now)
		tx.queue(wrapf("outbox row %v, key %q", r.ID, r.Key), insertOutboxSQL,
			r.ID.String(), string(r.Account), r.Turn.String(), string(r.Key), r.Destination, r.Payload, r.OrderKey,
			r.Status.String(), r.Attempts, micros(r.DueAt), r.ClaimedBy, micros(r.ClaimedAt), r.LastCode, r.RemoteRef,
			micros(r.CreatedAt), micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), r.AttemptBase, r.TraceContext)
		tx.record(storekit.RowHistory(turnframe.OutboxRecord{}, r, w.Actor, w.Note, w.Now))
		out = append(out, r.OutboxEntry)
	}
	return out, nil
}

// pendingMatters reports whether NextPhase's answer to the move from one
// phase to another depends on the number of the turn's pending entries: the
// rule reads it only as none or some, so asking with none and with one
// tells.
func pendingMatters(from, to turnframe.TurnPhase) bool {
	return (turnframe.NextPhase(from, to, 0) == nil) != (turnframe.NextPhase(from, to, 1) == nil)
}

// pendingAfter returns the number of the turn's pending entries as this
// Write leaves them, for the rule's move from one phase to another: 0 when
// the rule does not read it. The turn is locked, so no other Write changes
// its entries meanwhile.
func pendingAfter(ctx context.Context, tx *wtx, turn turnframe.TurnID, from, to turnframe.TurnPhase) (int, error) {
	if !pendingMatters(from, to) {
		return 0, nil
	}
	var n int
	if err := tx.QueryRow(ctx, countPendingSQL, turn.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending entries: %w", err)
	}
	return n, nil
}
