package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// change is one Apply being built: every row it creates or moves, as it will
// be stored. Nothing in the store changes until commit, so a Write refused
// half way writes nothing.
type change struct {
	turn     turnframe.StoredTurn
	newTurn  bool
	entries  map[entryKey]turnframe.JournalEntry // new, adopted and moved entries
	admitted []entryKey                          // new and adopted entries, in admission order
	events   []turnframe.StoredEvent
	outbox   []turnframe.OutboxRecord
	replay   *turnframe.ReplayRecord
	history  []turnframe.HistoryRecord // the audit trail of every move, in the order made
}

// Apply validates w and writes it entirely, or writes nothing and returns the
// error: ErrInvalid for bad input, ErrNotFound for a turn that does not exist
// for the account, ErrConflict for a refused transition, a moved revision, a
// key reused for a different command or an outbox row key the account holds
// already. Write.Advance is applied last and never refuses the Write. Every
// move the Write makes (the turn begun or moved, each entry admitted or
// moved, each row enqueued) is recorded in the audit trail as w.Actor, in
// the same step. w.App, if any, runs last, with an AppTx staging the
// application's data, before anything is stored: its error writes nothing
// and is returned wrapping turnframe.ErrAppWrite.
func (s *Store) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if err := w.Validate(); err != nil {
		return turnframe.Applied{}, err
	}
	w.Now = stamp(w.Now)
	if err := s.lock(ctx); err != nil {
		return turnframe.Applied{}, err
	}
	defer s.mu.Unlock()
	if earlier, ok, err := s.redelivery(w); ok || err != nil {
		if err != nil {
			return turnframe.Applied{}, fmt.Errorf("memstore: apply: %w", err)
		}
		return turnframe.Applied{Redelivered: &earlier}, nil
	}
	c, applied, err := s.build(w)
	if err != nil {
		return turnframe.Applied{}, fmt.Errorf("memstore: apply: %w", err)
	}
	app, err := s.runApp(ctx, w)
	if err != nil {
		return turnframe.Applied{}, fmt.Errorf("memstore: apply: %w", err)
	}
	s.commit(c)
	s.commitApp(app)
	if len(applied.Outbox) > 0 {
		s.enqueued.Signal()
	}
	return applied, nil
}

// redelivery returns the turn w.Begin's message id began already, if it
// did: ok, and nil when it is the same message (storekit.CheckRedelivery).
func (s *Store) redelivery(w turnframe.Write) (earlier turnframe.StoredTurn, ok bool, err error) {
	if w.Begin == nil || w.Begin.MessageID == "" {
		return earlier, false, nil
	}
	id, found := s.inbox[messageKey{w.Account, w.Begin.MessageID}]
	if !found {
		return earlier, false, nil
	}
	earlier = s.turns[id].turn
	return earlier, true, storekit.CheckRedelivery(earlier, *w.Begin)
}

func (s *Store) build(w turnframe.Write) (*change, turnframe.Applied, error) {
	c := &change{entries: make(map[entryKey]turnframe.JournalEntry)}
	var applied turnframe.Applied

	// Begin.
	if w.Begin != nil {
		if _, ok := s.turns[w.Turn]; ok {
			return nil, applied, fmt.Errorf("%w: turn %v already exists", turnframe.ErrConflict, w.Turn)
		}
		c.turn = *w.Begin
		c.turn.Phase = turnframe.PhaseReceived
		c.turn.ReceivedAt = stamp(c.turn.ReceivedAt)
		if c.turn.ReceivedAt.IsZero() {
			c.turn.ReceivedAt = w.Now
		}
		c.newTurn = true
		c.history = append(c.history, storekit.PhaseHistory(w.Account, w.Turn, turnframe.PhaseUnset, c.turn.Phase, w.Actor, "", w.Now))
	} else {
		t, err := s.findTurn(w.Account, w.Turn)
		if err != nil {
			return nil, applied, err
		}
		c.turn = t.turn
		if err := storekit.CheckExpectedPhase(c.turn.Phase, w.ExpectPhase); err != nil {
			return nil, applied, err
		}
	}
	c.turn.UpdatedAt = w.Now

	// Admit.
	if len(w.Admit) > 0 {
		if err := storekit.CheckAdmit(c.turn.Phase); err != nil {
			return nil, applied, err
		}
	}
	for _, cmd := range w.Admit {
		k := entryKey{w.Account, cmd.Key}
		if old, ok := s.entries[k]; ok {
			e, adopt, err := storekit.Readmit(old.entry, s.turns[old.entry.Turn].turn.Phase, cmd, w.Turn, w.Now)
			if err == nil {
				err = storekit.CheckRepeat(w, cmd.Key, true, adopt)
			}
			if err != nil {
				return nil, applied, err
			}
			if adopt {
				// Moved to this turn, it takes the next place in its
				// admission order (commit).
				c.entries[k] = e
				c.admitted = append(c.admitted, k)
			}
			applied.Admitted = append(applied.Admitted, copyEntry(e))
			applied.Earlier = append(applied.Earlier, copyEntry(old.entry))
			continue
		}
		if err := storekit.CheckRepeat(w, cmd.Key, false, false); err != nil {
			return nil, applied, err
		}
		e := storekit.NewEntry(w.Account, w.Turn, cmd, w.Now)
		c.entries[k] = e
		c.admitted = append(c.admitted, k)
		applied.Admitted = append(applied.Admitted, copyEntry(e))
		applied.Earlier = append(applied.Earlier, turnframe.JournalEntry{})
		c.history = append(c.history, storekit.EntryHistory(turnframe.JournalEntry{}, e, w.Actor, w.Note, w.Now))
	}

	// Events are numbered before Settle, which records their ids on the
	// committing entry; they belong to the one committing settlement (Write.Validate checked
	// there is exactly one when there are events or outbox rows).
	var committing turnframe.IdempotencyKey
	for _, st := range w.Settle {
		if st.To == turnframe.JournalCommitted {
			committing = st.Key
		}
	}
	next := make(map[turnframe.CaseKey]turnframe.CaseRevision)
	for _, ev := range w.Events {
		rev, ok := next[ev.Case]
		if !ok {
			rev = s.revision(w.Account, ev.Case)
		}
		rev++
		next[ev.Case] = rev
		ev.Data = bytes.Clone(ev.Data)
		c.events = append(c.events, turnframe.StoredEvent{
			ID: s.ids.EventID(w.Now), Account: w.Account, Turn: w.Turn, Key: committing,
			Revision: rev, Event: ev, At: w.Now,
		})
	}

	// Settle.
	for _, st := range w.Settle {
		k := entryKey{w.Account, st.Key}
		e, ok := c.entries[k]
		if !ok {
			row, found := s.entries[k]
			if !found || row.entry.Turn != w.Turn {
				return nil, applied, fmt.Errorf("entry %q of turn %v: %w", st.Key, w.Turn, turnframe.ErrNotFound)
			}
			e = row.entry
		}
		var evs []turnframe.StoredEvent
		if st.To == turnframe.JournalCommitted {
			evs = c.events
		}
		// c.turn.Phase is the phase as stored: this Write's own move
		// comes after Settle.
		moved, err := storekit.NextEntry(e, st, evs, c.turn.Phase, w.Actor, w.Now)
		if err != nil {
			return nil, applied, err
		}
		moved.LeaseUntil = stamp(moved.LeaseUntil)
		c.entries[k] = moved
		applied.Settled = append(applied.Settled, copyEntry(moved))
		if storekit.EntryMoved(e, moved) { // a lease renewal moves nothing the trail records
			c.history = append(c.history, storekit.EntryHistory(e, moved, w.Actor, w.Note, w.Now))
		}
	}

	// Expect is checked against the revisions before this Write's events.
	for ck, want := range w.Expect {
		if got := s.revision(w.Account, ck); got != want {
			return nil, applied, fmt.Errorf("%w: case %q is at revision %d, not %d", turnframe.ErrConflict, ck, got, want)
		}
	}
	for _, ev := range c.events {
		applied.Events = append(applied.Events, copyEvent(ev))
	}

	// Outbox. No two rows of an account share a key.
	keys := make(map[rowKey]bool, len(w.Outbox))
	for i, m := range w.Outbox {
		m.NotBefore = stamp(m.NotBefore)
		r := storekit.NewOutboxRecord(s.ids.OutboxID(w.Now), w.Account, w.Turn, committing, i, len(w.Outbox), m, w.Now)
		rk := rowKey{r.Account, r.Key}
		if _, ok := s.rowKeys[rk]; ok || keys[rk] {
			return nil, applied, fmt.Errorf("%w: account %q already holds an outbox row keyed %q", turnframe.ErrConflict, r.Account, r.Key)
		}
		keys[rk] = true
		c.outbox = append(c.outbox, r)
		applied.Outbox = append(applied.Outbox, copyRecord(r).OutboxEntry)
		c.history = append(c.history, storekit.RowHistory(turnframe.OutboxRecord{}, r, w.Actor, w.Note, w.Now))
	}

	// Phase, or Advance: a move Advance may not make is skipped.
	from := c.turn.Phase
	switch {
	case w.Phase != turnframe.PhaseUnset:
		if err := turnframe.NextPhase(c.turn.Phase, w.Phase, s.pendingAfter(c, w.Turn)); err != nil {
			return nil, applied, err
		}
		c.turn.Phase = w.Phase
	case w.Advance != turnframe.PhaseUnset:
		c.turn.Phase = storekit.AdvancePhase(c.turn.Phase, w.Advance, s.pendingAfter(c, w.Turn))
	}
	applied.Phase = c.turn.Phase

	// Replay.
	if w.Replay != nil {
		r := copyReplay(*w.Replay)
		c.replay = &r
	}
	if c.turn.Phase != from {
		c.history = append(c.history, storekit.PhaseHistory(w.Account, w.Turn, from, c.turn.Phase, w.Actor, s.abandonCode(c, w.Turn), w.Now))
	}
	return c, applied, nil
}

// abandonCode is the code the audit trail gives a turn's move: the abandon
// code of its replay record as the Write leaves it (the Write's own, or
// else the one stored), when the move is to Abandoned; else none.
func (s *Store) abandonCode(c *change, turn turnframe.TurnID) string {
	switch {
	case c.turn.Phase != turnframe.PhaseAbandoned:
		return ""
	case c.replay != nil:
		return c.replay.AbandonCode
	}
	if t, ok := s.turns[turn]; ok && t.replay != nil {
		return t.replay.AbandonCode
	}
	return ""
}

func (s *Store) revision(account turnframe.AccountID, c turnframe.CaseKey) turnframe.CaseRevision {
	return turnframe.CaseRevision(len(s.cases[caseKey{account, c}]))
}

// pendingAfter counts the turn's Pending and Executing entries as they will
// be once c is written.
func (s *Store) pendingAfter(c *change, turn turnframe.TurnID) int {
	n := 0
	for _, k := range s.byTurn[turn] {
		e, ok := c.entries[k]
		if !ok {
			e = s.entries[k].entry
		}
		if e.Status.IsPending() {
			n++
		}
	}
	for _, k := range c.admitted {
		if c.entries[k].Status.IsPending() {
			n++
		}
	}
	return n
}

func (s *Store) commit(c *change) {
	id := c.turn.ID
	t, ok := s.turns[id]
	if !ok {
		t = &turnRow{}
		s.turns[id] = t
	}
	t.turn = c.turn
	if c.newTurn && c.turn.MessageID != "" {
		s.inbox[messageKey{c.turn.Account, c.turn.MessageID}] = id
	}
	if c.replay != nil {
		t.replay = c.replay
	}
	for _, k := range c.admitted {
		if old, ok := s.entries[k]; ok { // adopted: it leaves its old turn
			s.byTurn[old.entry.Turn] = slices.DeleteFunc(s.byTurn[old.entry.Turn], func(o entryKey) bool { return o == k })
		}
		s.seq++
		s.entries[k] = &entryRow{seq: s.seq}
		s.byTurn[id] = append(s.byTurn[id], k)
	}
	for k, e := range c.entries {
		s.entries[k].entry = e
	}
	for _, ev := range c.events {
		s.events = append(s.events, ev)
		i := len(s.events) - 1
		s.eventAt[ev.ID] = i
		ck := caseKey{ev.Account, ev.Case}
		s.cases[ck] = append(s.cases[ck], i)
	}
	for _, r := range c.outbox {
		s.seq++
		s.outbox[r.ID] = &outboxRow{rec: r, seq: s.seq}
		s.rowKeys[rowKey{r.Account, r.Key}] = r.ID
	}
	s.record(c.history...)
}

// sortedOutbox returns the outbox rows in enqueue order.
func (s *Store) sortedOutbox() []*outboxRow {
	rows := make([]*outboxRow, 0, len(s.outbox))
	for _, r := range s.outbox {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *outboxRow) int { return cmp.Compare(a.seq, b.seq) })
	return rows
}
