package memstore

import (
	"context"
	"fmt"

	"github.com/turnframe/turnframe"
)

// The audit trail: every record, per subject, in the order it was appended
// (which is Seq order). The records of a transition are built by the root
// helpers (storekit.EntryHistory, RowHistory, PhaseHistory) where the
// transition is made, and appended with it under the store's one mutex, so
// a refused transition appends nothing.

// canonical returns the key the store files subject's history under: the
// subject with its reference as the store writes it (an id in its canonical
// form), and false for a reference that names nothing this store could hold
// (an outbox or turn reference that is not an id).
func canonical(subject turnframe.Subject) (turnframe.Subject, bool) {
	switch subject.Kind {
	case turnframe.SubjectOutbox:
		id, err := turnframe.ParseOutboxID(subject.Ref)
		if err != nil {
			return subject, false
		}
		subject.Ref = id.String()
	case turnframe.SubjectTurn:
		id, err := turnframe.ParseTurnID(subject.Ref)
		if err != nil {
			return subject, false
		}
		subject.Ref = id.String()
	}
	return subject, true
}

// record appends recs to the trail, numbering each; the caller holds the
// lock and has made the transitions they record.
func (s *Store) record(recs ...turnframe.HistoryRecord) {
	for _, r := range recs {
		s.hseq++
		r.Seq = s.hseq
		r.At = stamp(r.At)
		s.history[r.Subject] = append(s.history[r.Subject], r)
	}
}

// History returns at most limit records of subject with a Seq above after,
// oldest first; none for a subject without history or of another account.
// ErrInvalid for a bad subject or limit.
func (s *Store) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	if err := subject.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	key, ok := canonical(subject)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if !ok {
		return nil, nil
	}
	var out []turnframe.HistoryRecord
	for _, r := range s.history[key] {
		if r.Seq > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// RecordEvidence appends rec as evidence that moves nothing: From and To
// are set to the subject's status (a turn's phase) as it is now, and
// Evidence to true. ErrInvalid for a bad record (From and To aside, which
// the store sets); ErrNotFound for a subject that does not exist for its
// account.
func (s *Store) RecordEvidence(ctx context.Context, rec turnframe.HistoryRecord) error {
	check := rec
	check.From, check.To = "-", "-" // the store's to set: not the caller's to get right
	if err := check.Validate(); err != nil {
		return err
	}
	key, ok := canonical(rec.Subject)
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	status, found := "", false
	if ok {
		status, found = s.statusOf(key)
	}
	if !found {
		return fmt.Errorf("memstore: record evidence: %v %q of %q: %w", rec.Kind, rec.Ref, rec.Account, turnframe.ErrNotFound)
	}
	rec.Subject = key
	rec.From, rec.To, rec.Evidence = status, status, true
	s.record(rec)
	return nil
}

// statusOf returns the name of the subject's status as stored (a turn's
// phase), and whether the subject exists for its account. The caller holds
// the lock.
func (s *Store) statusOf(subject turnframe.Subject) (string, bool) {
	switch subject.Kind {
	case turnframe.SubjectJournal:
		e, ok := s.entries[entryKey{subject.Account, turnframe.IdempotencyKey(subject.Ref)}]
		if !ok {
			return "", false
		}
		return e.entry.Status.String(), true
	case turnframe.SubjectOutbox:
		id, _ := turnframe.ParseOutboxID(subject.Ref) // canonical: it parses
		r, ok := s.outbox[id]
		if !ok || r.rec.Account != subject.Account {
			return "", false
		}
		return r.rec.Status.String(), true
	case turnframe.SubjectTurn:
		id, _ := turnframe.ParseTurnID(subject.Ref) // canonical: it parses
		t, err := s.findTurn(subject.Account, id)
		if err != nil {
			return "", false
		}
		return t.turn.Phase.String(), true
	}
	return "", false
}
