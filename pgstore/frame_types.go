package pgstore

import "github.com/turnframe/turnframe"

// The moves of frame, type by type: each copies what it changes, so a
// caller's values are never written to.

func (f frame) writeIn(w turnframe.Write) turnframe.Write {
	if f.off == 0 {
		return w
	}
	w.Now = f.in(w.Now)
	if w.Begin != nil {
		b := *w.Begin
		b.ReceivedAt, b.UpdatedAt = f.in(b.ReceivedAt), f.in(b.UpdatedAt)
		w.Begin = &b
	}
	if len(w.Outbox) > 0 {
		msgs := make([]turnframe.OutboxMessage, len(w.Outbox))
		for i, m := range w.Outbox {
			m.NotBefore = f.in(m.NotBefore)
			msgs[i] = m
		}
		w.Outbox = msgs
	}
	return w
}

func (f frame) appliedOut(a turnframe.Applied) turnframe.Applied {
	if f.off == 0 {
		return a
	}
	a.Admitted = f.entriesOut(a.Admitted)
	a.Settled = f.entriesOut(a.Settled)
	a.Earlier = f.entriesOut(a.Earlier)
	a.Events = f.eventsOut(a.Events)
	for i := range a.Outbox {
		a.Outbox[i].CreatedAt = f.out(a.Outbox[i].CreatedAt)
	}
	if a.Redelivered != nil {
		t := f.turnOut(*a.Redelivered)
		a.Redelivered = &t
	}
	return a
}

func (f frame) turnOut(t turnframe.StoredTurn) turnframe.StoredTurn {
	t.ReceivedAt, t.UpdatedAt = f.out(t.ReceivedAt), f.out(t.UpdatedAt)
	return t
}

func (f frame) markerOut(m turnframe.TurnPhaseMarker) turnframe.TurnPhaseMarker {
	m.UpdatedAt = f.out(m.UpdatedAt)
	return m
}

func (f frame) entryOut(e turnframe.JournalEntry) turnframe.JournalEntry {
	e.LeaseUntil, e.AdmittedAt, e.UpdatedAt = f.out(e.LeaseUntil), f.out(e.AdmittedAt), f.out(e.UpdatedAt)
	return e
}

func (f frame) entriesOut(es []turnframe.JournalEntry) []turnframe.JournalEntry {
	for i := range es {
		es[i] = f.entryOut(es[i])
	}
	return es
}

func (f frame) eventsOut(evs []turnframe.StoredEvent) []turnframe.StoredEvent {
	for i := range evs {
		evs[i].At = f.out(evs[i].At)
	}
	return evs
}

func (f frame) recordOut(r turnframe.OutboxRecord) turnframe.OutboxRecord {
	r.CreatedAt, r.DueAt, r.ClaimedAt = f.out(r.CreatedAt), f.out(r.DueAt), f.out(r.ClaimedAt)
	r.LeaseUntil, r.UpdatedAt, r.FinishedAt = f.out(r.LeaseUntil), f.out(r.UpdatedAt), f.out(r.FinishedAt)
	return r
}

func (f frame) claimIn(c turnframe.Claim) turnframe.Claim {
	c.CreatedAt, c.ClaimedAt, c.LeaseUntil = f.in(c.CreatedAt), f.in(c.ClaimedAt), f.in(c.LeaseUntil)
	return c
}

func (f frame) claimOut(c turnframe.Claim) turnframe.Claim {
	c.CreatedAt, c.ClaimedAt, c.LeaseUntil = f.out(c.CreatedAt), f.out(c.ClaimedAt), f.out(c.LeaseUntil)
	return c
}

func (f frame) claimsIn(cs []turnframe.Claim) []turnframe.Claim {
	if f.off == 0 {
		return cs
	}
	moved := make([]turnframe.Claim, len(cs))
	for i, c := range cs {
		moved[i] = f.claimIn(c)
	}
	return moved
}

func (f frame) settlementsIn(ss []turnframe.OutboxSettlement) []turnframe.OutboxSettlement {
	if f.off == 0 {
		return ss
	}
	moved := make([]turnframe.OutboxSettlement, len(ss))
	for i, st := range ss {
		st.Claim = f.claimIn(st.Claim)
		st.RetryAt, st.Now = f.in(st.RetryAt), f.in(st.Now)
		moved[i] = st
	}
	return moved
}

func (f frame) historyOut(rs []turnframe.HistoryRecord) []turnframe.HistoryRecord {
	for i := range rs {
		rs[i].At = f.out(rs[i].At)
	}
	return rs
}
