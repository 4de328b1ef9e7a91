package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// Apply validates w (ErrInvalid, before any transaction starts) and writes
// it in one BEGIN IMMEDIATE transaction, or writes nothing and returns the
// error: ErrNotFound for a turn that does not exist for the account (or an
// entry to settle that is not the turn's), ErrConflict for a refused
// transition (storekit.NextEntry, NextPhase), a moved revision, a key
// reused for a different command, an outbox row whose key the account's
// rows already hold (the UNIQUE index outbox_key) or a Begin of a turn id
// that exists; ErrBusy when another connection kept the file locked past
// the busy timeout; ErrClosed after Close. A refused Advance is no error:
// the turn stays where it was (storekit.AdvancePhase) and Applied.Phase
// says so. An entry storekit.Readmit adopts is moved to w's turn after the
// entries it admitted before. Every move w makes is recorded in the audit
// trail, as w.Actor with w.Note, in the same transaction: the turn begun
// and its phase moved (storekit.PhaseHistory), each entry admitted and
// each settlement that moves its entry (storekit.EntryHistory; a lease
// renewal moves nothing, and an adoption moves no status, so neither is
// recorded), each row enqueued (storekit.RowHistory). w.App, if any, runs
// last in the same transaction (SQLTx gives it the *sql.Tx), after every
// check passed: its error rolls all of w back, its rows included, and is
// returned wrapping turnframe.ErrAppWrite, as is a deferred constraint of
// the app's tables that fails at the commit. A crash before the commit leaves
// nothing of w, the app's rows included; after it, all of w.
//
// Apply is BeginTx, ApplyTx and Commit; use those to write the
// application's own tables in the same transaction.
func (s *Store) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	done, err := s.enter("apply")
	if err != nil {
		return turnframe.Applied{}, err
	}
	defer done()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply", err)
	}
	defer tx.Rollback()
	applied, err := s.apply(ctx, s.wrap(tx), w)
	if err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply", err)
	}
	if err := tx.Commit(); err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply: commit", appCommitFailed(w, err))
	}
	s.notifyEnqueued(applied)
	return applied, nil
}

// BeginTx starts a BEGIN IMMEDIATE transaction on the store's one writer
// connection, for an application that writes its own tables in the same
// file and commits them together with a Write (see ApplyTx). The caller
// must end it with Commit or Rollback.
//
// The rule that comes with one writer connection: until the transaction
// ends, nothing else writes — every other write of this Store (Apply, a
// claim, a settlement) waits for the connection, and a write of another
// Store or process waits for the file lock, up to its busy timeout. Calling
// a write method of this Store from the goroutine that holds the
// transaction therefore deadlocks; use ApplyTx. Reads are not affected.
// It fails with ErrBusy if another connection holds the file's write lock
// past the busy timeout.
func (s *Store) BeginTx(ctx context.Context) (*sql.Tx, error) {
	done, err := s.enter("begin")
	if err != nil {
		return nil, err
	}
	defer done()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, "begin", err)
	}
	return tx, nil
}

// ApplyTx is Apply within tx, a transaction from BeginTx: it validates w
// (ErrInvalid) and writes it into tx, returning the same errors as Apply.
// Nothing is durable until the caller commits tx; if the caller rolls back,
// nothing of w was written. w is written under a savepoint: after an error,
// tx holds nothing of w and everything the caller wrote before, so the
// caller may go on and commit its own rows. That holds on a full disk too:
// the writer keeps a transaction's changed pages and its temporary files
// (savepoint journals, sorts) in memory until its COMMIT (no cache spill,
// temp_store=MEMORY), so a full disk fails the caller's COMMIT, not a
// statement of w; a transaction costs memory in proportion to what it
// changes. Should tx be lost all the same (SQLite rolled it back), the error
// says so and wraps none of the sentinels: roll tx back.
//
// tx must come from this Store's BeginTx. w.App, if any, runs in tx under
// the same savepoint, after w. The savepoint is named turnframe_apply, a
// name the library keeps: an App that opened a savepoint of that name would
// have its own undone in place of w's (the database resolves a name to the
// newest savepoint holding it), and a refused w would stay in tx.
func (s *Store) ApplyTx(ctx context.Context, tx *sql.Tx, w turnframe.Write) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	if tx == nil {
		return turnframe.Applied{}, &turnframe.InvalidError{Field: "tx", Reason: "nil transaction"}
	}
	done, err := s.enter("apply")
	if err != nil {
		return turnframe.Applied{}, err
	}
	defer done()
	t := s.wrap(tx)
	if _, err := t.ExecContext(ctx, savepointSQL); err != nil {
		return turnframe.Applied{}, s.fail(ctx, "apply: savepoint", err)
	}
	// Undo w alone, even if ctx ended, on an error and on a panic of w.App:
	// the caller's own rows stay, and a caller that recovers the panic and
	// commits commits nothing of w.
	undo := func() error {
		uctx := context.WithoutCancel(ctx)
		if _, err := t.ExecContext(uctx, rollbackToSavepointSQL); err != nil {
			return err
		}
		_, err := t.ExecContext(uctx, releaseSavepointSQL)
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			undo()
			panic(p)
		}
	}()
	applied, err := s.apply(ctx, t, w)
	if err == nil {
		// A release a done ctx kept from SQLite leaves the savepoint open
		// with w in it: undone below like any error.
		if _, err = t.ExecContext(ctx, releaseSavepointSQL); err == nil {
			s.notifyEnqueued(applied) // before the caller's commit: see Enqueued
			return applied, nil
		}
		err = fmt.Errorf("release savepoint: %w", err)
	}
	if rerr := undo(); rerr != nil {
		// tx is lost or in a state nobody knows: not an error to try again,
		// so neither error stays in the chain (a full disk would say busy).
		return turnframe.Applied{}, s.fail(ctx, "apply", fmt.Errorf("tx is lost, roll it back: the write failed (%v) and undoing it failed (%v)", err, rerr))
	}
	return turnframe.Applied{}, s.fail(ctx, "apply", err)
}

// The statements of Apply, prepared when the store opens (stmt.go).
const (
	// ApplyTx writes w under this savepoint, so a refused Write leaves the
	// caller's own rows in tx.
	savepointSQL           = `SAVEPOINT turnframe_apply`
	rollbackToSavepointSQL = `ROLLBACK TO turnframe_apply`
	releaseSavepointSQL    = `RELEASE turnframe_apply`

	insertTurnSQL = `INSERT INTO turns (` + turnCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	// messageTurnSQL finds the turn a message id began, by turns_message.
	messageTurnSQL = `SELECT ` + turnCols + ` FROM turns WHERE account = ? AND message_id = ?`
	// updateTurnSQL keeps the stored replay record when the new one is NULL.
	updateTurnSQL = `UPDATE turns SET phase = ?, updated_at = ?, replay = coalesce(?, replay) WHERE id = ?`
	// touchTurnSQL is updateTurnSQL for a phase that does not change: a
	// phase in the SET clause rewrites the turns_unfinished entry (another
	// page to write at the commit) even when its value stays the same.
	touchTurnSQL = `UPDATE turns SET updated_at = ?, replay = coalesce(?, replay) WHERE id = ?`

	insertEntrySQL = `INSERT INTO journal (` + entryCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// entrySetSQL writes every column of an entry but its account and key:
	// it takes entryArgs with account and key moved to the end.
	entrySetSQL = `turn = ?, case_key = ?, name = ?, payload = ?, status = ?,
		attempt = ?, attempts = ?, event_ids = ?, code = ?, remote_ref = ?, admitted_at = ?, updated_at = ?,
		lease_until = ?, needs_approval = ? WHERE account = ? AND key = ?`
	updateEntrySQL = `UPDATE journal SET ` + entrySetSQL
	// adoptEntrySQL is updateEntrySQL that also gives the entry the next
	// admission sequence number: a turn that adopts an entry lists it
	// after the entries it admitted before (journal_turn is (turn, seq)).
	// seq is the rowid, so max(seq) reads one end of the table's b-tree.
	adoptEntrySQL = `UPDATE journal SET seq = (SELECT max(seq) + 1 FROM journal), ` + entrySetSQL
	// settleEntrySQL writes the columns of updateEntrySQL that a settlement
	// changes, leaving the command's (and with it the journal_turn index
	// entry, another page at the commit) as stored; see sameCommandColumns.
	// It takes settleEntryArgs.
	settleEntrySQL = `UPDATE journal SET status = ?, attempt = ?, attempts = ?, event_ids = ?, code = ?,
		remote_ref = ?, updated_at = ?, lease_until = ? WHERE account = ? AND key = ?`
	// countPendingSQL counts the turn's entries that IsPending, reading
	// only the partial index journal_pending, whose condition (IsPending's
	// status list) it must repeat literally or SQLite will not use it:
	// a restatement of the rule the conformance suite holds to it
	// (AdvanceLandsTheSettlementAndKeepsThePhaseWhileAnotherEntryIsPending).
	// INDEXED BY turns a schema without the index into an error.
	countPendingSQL = `SELECT count(*) FROM journal INDEXED BY journal_pending
		WHERE turn = ? AND status IN ('pending', 'executing')`

	insertEventSQL = `INSERT INTO events (` + eventCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// insertOutboxSQL fails on the UNIQUE index outbox_key when the
	// account already has a row with the key: ErrConflict.
	insertOutboxSQL = `INSERT INTO outbox (id, account, turn, key, destination, payload, order_key,
		status, attempts, due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at,
		lease_until, attempt_base, trace_context)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// apply writes a validated w into tx, in the order Write documents.
func (s *Store) apply(ctx context.Context, tx *wtx, w turnframe.Write) (turnframe.Applied, error) {
	var applied turnframe.Applied
	w = stampWrite(w)

	if earlier, ok, err := redelivery(ctx, tx, w); ok || err != nil {
		if err != nil {
			return applied, err
		}
		applied.Redelivered = &earlier
		return applied, nil
	}
	turn, err := beginOrFindTurn(ctx, tx, w)
	if err != nil {
		return applied, err
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
	// NextEntry records their ids on its entry, so they are numbered first.
	var committing turnframe.IdempotencyKey
	for _, st := range w.Settle {
		if st.To == turnframe.JournalCommitted {
			committing = st.Key
		}
	}
	events, err := s.numberEvents(ctx, tx, w, committing)
	if err != nil {
		return applied, err
	}

	for _, st := range w.Settle {
		var evs []turnframe.StoredEvent
		if st.To == turnframe.JournalCommitted {
			evs = events
		}
		e, err := settleEntry(ctx, tx, w, stored, st, evs)
		if err != nil {
			return applied, err
		}
		applied.Settled = append(applied.Settled, e)
	}

	// Expect is checked against the revisions before this Write's events,
	// which are not inserted yet: numberEvents read those of the events'
	// cases already.
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
		if err := insertEvent(ctx, tx, ev); err != nil {
			return applied, fmt.Errorf("event %v: %w", ev.ID, err)
		}
	}
	applied.Events = events

	for i, m := range w.Outbox {
		r := storekit.NewOutboxRecord(s.ids.OutboxID(w.Now), w.Account, w.Turn, committing, i, len(w.Outbox), m, w.Now)
		if err := insertOutbox(ctx, tx, r); err != nil {
			return applied, fmt.Errorf("outbox row %v, key %q: %w", r.ID, r.Key, err)
		}
		tx.record(storekit.RowHistory(turnframe.OutboxRecord{}, r, w.Actor, w.Note, w.Now))
		applied.Outbox = append(applied.Outbox, r.OutboxEntry)
	}

	// Phase, or Advance (Validate refuses both), counting the turn's
	// pending entries after everything else of this Write, and only when
	// the rule's answer depends on them.
	switch {
	case w.Phase != turnframe.PhaseUnset:
		pending, err := pendingAfter(ctx, tx, w.Turn, turn.Phase, w.Phase)
		if err != nil {
			return applied, err
		}
		if err := turnframe.NextPhase(turn.Phase, w.Phase, pending); err != nil {
			return applied, err
		}
		turn.Phase = w.Phase
	case w.Advance != turnframe.PhaseUnset:
		pending, err := pendingAfter(ctx, tx, w.Turn, turn.Phase, w.Advance)
		if err != nil {
			return applied, err
		}
		turn.Phase = storekit.AdvancePhase(turn.Phase, w.Advance, pending)
	}
	applied.Phase = turn.Phase
	if turn.Phase != stored {
		code, err := abandonCode(ctx, tx, w, turn.Phase)
		if err != nil {
			return applied, err
		}
		tx.record(storekit.PhaseHistory(w.Account, w.Turn, stored, turn.Phase, w.Actor, code, w.Now))
	}

	var replay any // NULL keeps the stored record
	if w.Replay != nil {
		b, err := json.Marshal(w.Replay)
		if err != nil {
			return applied, fmt.Errorf("replay: %w", err)
		}
		replay = string(b)
	}
	switch {
	case turn.Phase != stored:
		_, err = tx.ExecContext(ctx, updateTurnSQL, turn.Phase.String(), micros(w.Now), replay, w.Turn.String())
	case replay != nil || !turn.UpdatedAt.Equal(w.Now):
		_, err = tx.ExecContext(ctx, touchTurnSQL, micros(w.Now), replay, w.Turn.String())
	default:
		// The row already holds all of it: the turn was inserted by this
		// Write (or last updated at this very microsecond) and keeps its
		// phase and replay record.
	}
	if err != nil {
		return applied, fmt.Errorf("update turn: %w", err)
	}
	if err := tx.flushHistory(ctx); err != nil {
		return applied, err
	}
	return applied, runApp(ctx, tx, w)
}

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
	var text sql.NullString
	if err := tx.QueryRowContext(ctx, storedReplaySQL, w.Turn.String()).Scan(&text); err != nil {
		return "", fmt.Errorf("replay of turn %v: %w", w.Turn, translate(ctx, err))
	}
	if !text.Valid {
		return "", nil
	}
	var r turnframe.ReplayRecord
	if err := json.Unmarshal([]byte(text.String), &r); err != nil {
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

// redelivery returns the turn w.Begin's message id began already, if it
// did: ok, and nil when it is the same message (storekit.CheckRedelivery).
// The store's one writer runs one transaction at a time, so a delivery
// racing this one either committed its turn before this read or begins
// none until this transaction ends.
func redelivery(ctx context.Context, tx *wtx, w turnframe.Write) (earlier turnframe.StoredTurn, ok bool, err error) {
	if w.Begin == nil || w.Begin.MessageID == "" {
		return earlier, false, nil
	}
	earlier, err = scanTurn(tx.QueryRowContext(ctx, messageTurnSQL, string(w.Account), string(w.Begin.MessageID)))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return earlier, false, nil
	case err != nil:
		return earlier, false, fmt.Errorf("message %q: %w", w.Begin.MessageID, translate(ctx, err))
	}
	return earlier, true, storekit.CheckRedelivery(earlier, *w.Begin)
}

// beginOrFindTurn creates the turn of a Begin (ErrConflict if its id
// exists, in any account) or loads the turn the Write changes (ErrNotFound
// if it does not exist for the account).
func beginOrFindTurn(ctx context.Context, tx *wtx, w turnframe.Write) (turnframe.StoredTurn, error) {
	if w.Begin == nil {
		return findTurn(ctx, tx, w.Account, w.Turn)
	}
	t := *w.Begin
	t.Phase = turnframe.PhaseReceived
	if t.ReceivedAt.IsZero() {
		t.ReceivedAt = w.Now
	}
	t.UpdatedAt = w.Now
	_, err := tx.ExecContext(ctx, insertTurnSQL,
		t.ID.String(), string(t.Account), t.Conversation.String(), t.Text, t.Phase.String(),
		micros(t.ReceivedAt), micros(t.UpdatedAt), messageArg(t.MessageID))
	if err != nil {
		return t, fmt.Errorf("begin turn %v: %w", t.ID, translate(ctx, err))
	}
	return t, nil
}

// admit returns the entry for cmd, admitted into w's turn, whose phase is
// phase: a new Pending one, or, for a key the account used already, what
// storekit.Readmit makes of the entry it admitted. earlier is that entry as
// it was found (Applied.Earlier), zero for a new one.
func admit(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase, cmd turnframe.Command) (entry, earlier turnframe.JournalEntry, err error) {
	existing, err := findEntry(ctx, tx, w.Account, cmd.Key)
	switch {
	case err == nil:
		entry, err := readmit(ctx, tx, w, phase, existing, cmd)
		return entry, existing, err
	case !errors.Is(err, turnframe.ErrNotFound):
		return existing, earlier, err
	}
	if err := storekit.CheckRepeat(w, cmd.Key, false, false); err != nil {
		return existing, earlier, err
	}
	e := storekit.NewEntry(w.Account, w.Turn, cmd, w.Now)
	args, err := entryArgs(e)
	if err != nil {
		return e, earlier, err
	}
	if _, err := tx.ExecContext(ctx, insertEntrySQL, args...); err != nil {
		return e, earlier, fmt.Errorf("admit %q: %w", cmd.Key, translate(ctx, err))
	}
	tx.record(storekit.EntryHistory(turnframe.JournalEntry{}, e, w.Actor, w.Note, w.Now))
	return e, earlier, nil
}

// readmit applies storekit.Readmit to existing, the entry cmd's key
// admitted, reading the phase of its turn (phase, when that is w's turn).
// An entry the rule adopts is stored moved to w's turn, with the next
// admission sequence number; any other stands as it is.
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
	args, err := entryArgs(entry)
	if err != nil {
		return existing, err
	}
	if _, err := tx.ExecContext(ctx, adoptEntrySQL, append(args[2:], args[0], args[1])...); err != nil {
		return existing, fmt.Errorf("adopt %q: %w", cmd.Key, translate(ctx, err))
	}
	return entry, nil
}

// settleEntry moves the turn's entry by NextEntry, for a turn whose phase
// as stored is phase, as w.Actor, stores the result and records the move
// (none for a lease renewal).
func settleEntry(ctx context.Context, tx *wtx, w turnframe.Write, phase turnframe.TurnPhase, st turnframe.Settlement, events []turnframe.StoredEvent) (turnframe.JournalEntry, error) {
	e, err := findEntry(ctx, tx, w.Account, st.Key)
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
	args, err := entryArgs(next)
	if err != nil {
		return e, err
	}
	// entryArgs begins with account and key, which do not change: they
	// become the WHERE clause's arguments.
	if sameCommandColumns(e, next) {
		_, err = tx.ExecContext(ctx, settleEntrySQL, settleEntryArgs(args)...)
	} else {
		_, err = tx.ExecContext(ctx, updateEntrySQL, append(args[2:], args[0], args[1])...)
	}
	if err != nil {
		return e, fmt.Errorf("settle %q: %w", st.Key, translate(ctx, err))
	}
	if storekit.EntryMoved(e, next) { // a lease renewal moves nothing the trail records
		tx.record(storekit.EntryHistory(e, next, w.Actor, w.Note, w.Now))
	}
	return next, nil
}

// settleEntryArgs picks settleEntrySQL's arguments out of entryArgs.
func settleEntryArgs(args []any) []any {
	const (
		account, key, status, attempt, attempts, eventIDs, code, remoteRef = 0, 1, 6, 7, 8, 9, 10, 11
		updatedAt, leaseUntil                                              = 13, 14
	)
	return []any{args[status], args[attempt], args[attempts], args[eventIDs], args[code], args[remoteRef],
		args[updatedAt], args[leaseUntil], args[account], args[key]}
}

// sameCommandColumns reports whether next, what NextEntry made of e, holds
// the values e was read with in every column settleEntrySQL leaves alone:
// turn, case, name, payload and admission time. NextEntry changes none of
// them today; should it ever, the whole row is written.
func sameCommandColumns(e, next turnframe.JournalEntry) bool {
	return e.Turn == next.Turn && e.Case == next.Case && e.Name == next.Name &&
		bytes.Equal(e.Payload, next.Payload) && (e.Payload == nil) == (next.Payload == nil) &&
		micros(e.AdmittedAt) == micros(next.AdmittedAt) && e.NeedsApproval == next.NeedsApproval
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

// numberEvents gives each event of w its id, its case's next revision and
// the committing command's key.
func (s *Store) numberEvents(ctx context.Context, tx *wtx, w turnframe.Write, key turnframe.IdempotencyKey) ([]turnframe.StoredEvent, error) {
	if len(w.Events) == 0 {
		return nil, nil
	}
	next := make(map[turnframe.CaseKey]turnframe.CaseRevision)
	events := make([]turnframe.StoredEvent, 0, len(w.Events))
	for _, ev := range w.Events {
		rev, ok := next[ev.Case]
		if !ok {
			var err error
			if rev, err = caseRevision(ctx, tx, w.Account, ev.Case); err != nil {
				return nil, err
			}
		}
		rev++
		next[ev.Case] = rev
		ev.Data = bytes.Clone(ev.Data)
		events = append(events, turnframe.StoredEvent{
			ID: s.ids.EventID(w.Now), Account: w.Account, Turn: w.Turn, Key: key,
			Revision: rev, Event: ev, At: w.Now,
		})
	}
	return events, nil
}

func insertEvent(ctx context.Context, tx *wtx, ev turnframe.StoredEvent) error {
	_, err := tx.ExecContext(ctx, insertEventSQL,
		ev.ID.String(), string(ev.Account), string(ev.Case), int64(ev.Revision), ev.Turn.String(),
		string(ev.Key), ev.Type, blob(ev.Data), micros(ev.At))
	return translate(ctx, err)
}

// insertOutbox enqueues r and marks it held when an earlier row of its
// order key is active (order.go).
func insertOutbox(ctx context.Context, tx *wtx, r turnframe.OutboxRecord) error {
	res, err := tx.ExecContext(ctx, insertOutboxSQL,
		r.ID.String(), string(r.Account), r.Turn.String(), string(r.Key), r.Destination, blob(r.Payload), r.OrderKey,
		r.Status.String(), r.Attempts, micros(r.DueAt), r.ClaimedBy, micros(r.ClaimedAt), r.LastCode, r.RemoteRef,
		micros(r.CreatedAt), micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), r.AttemptBase, r.TraceContext)
	if err != nil || r.OrderKey == "" {
		return translate(ctx, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, holdSQL, string(r.Account), r.OrderKey, seq)
	return translate(ctx, err)
}

// pendingMatters reports whether NextPhase's answer to the move from one
// phase to another depends on the number of the turn's pending entries. The
// rule reads that number only as none or some (a phase that needs every
// entry settled), so asking it with none and with one tells; counting costs a
// read of every entry of the turn, and most moves need no count.
func pendingMatters(from, to turnframe.TurnPhase) bool {
	return (turnframe.NextPhase(from, to, 0) == nil) != (turnframe.NextPhase(from, to, 1) == nil)
}

// pendingAfter returns the number of the turn's pending entries as this
// Write leaves them, for the rule's move from one phase to another: 0 when
// the rule does not read it.
func pendingAfter(ctx context.Context, tx *wtx, turn turnframe.TurnID, from, to turnframe.TurnPhase) (int, error) {
	if !pendingMatters(from, to) {
		return 0, nil
	}
	return countPending(ctx, tx, turn)
}

// countPending counts the turn's entries that IsPending, as NextPhase needs
// them after this Write.
func countPending(ctx context.Context, tx *wtx, turn turnframe.TurnID) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, countPendingSQL, turn.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending entries: %w", translate(ctx, err))
	}
	return n, nil
}
