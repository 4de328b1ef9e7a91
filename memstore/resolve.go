package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// The moves of outbox rows that no claim makes: a resolution of an unknown
// outcome, the expiry of ended leases (recovery), and an operator's
// requeue and release. Each is recorded in the audit trail with its actor.

// Resolve settles an OutcomeUnknown or NeedsIntervention row by
// storekit.ResolveRow, recorded as res.Actor with res.Note. ErrInvalid for
// bad input (turnframe.Resolution.Validate), ErrNotFound for no such row,
// ErrConflict for a row in another status, or one that needs intervention
// and an actor that may not intervene.
func (s *Store) Resolve(ctx context.Context, res turnframe.Resolution) error {
	if err := res.Validate(); err != nil {
		return err
	}
	res.Now = stamp(res.Now)
	return s.moveOutbox(ctx, "resolve", res.ID, res.Actor, res.Note, res.Now, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
		return storekit.ResolveRow(r, res)
	})
}

// moveOutbox applies rule to row id as stored, keeps what it returns and
// records the move as actor with note at now: ErrNotFound for no such row,
// or the rule's error, and then the row and its history are as they were.
func (s *Store) moveOutbox(ctx context.Context, op string, id turnframe.OutboxID, actor turnframe.Actor, note string, now time.Time, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, ok := s.outbox[id]
	if !ok {
		return fmt.Errorf("memstore: %s: outbox row %v: %w", op, id, turnframe.ErrNotFound)
	}
	next, err := rule(r.rec)
	if err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.record(storekit.RowHistory(r.rec, next, actor, note, now))
	r.rec = next
	return nil
}

// Requeue moves a Failed row back to Pending, due at at, by
// storekit.RequeueRow, recorded as turnframe.ActorOperator. attempts, when
// not zero, fences it: the row must still be failed at that many attempts.
// ErrInvalid for a zero id, a negative attempts or a bad at; ErrNotFound
// for no such row, ErrConflict for a row in another status or at other
// attempts.
func (s *Store) Requeue(ctx context.Context, id turnframe.OutboxID, attempts int, at time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckFence("attempts", attempts); err != nil {
		return err
	}
	if err := turnframe.CheckTime("at", at); err != nil {
		return err
	}
	at = stamp(at)
	return s.moveOutbox(ctx, "requeue", id, turnframe.ActorOperator, "", at, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
		return storekit.RequeueRow(r, attempts, at)
	})
}

// ExpireClaims moves every Dispatching row whose lease ended at now
// (turnframe.LeaseEnded) to OutcomeUnknown by storekit.ExpireRow, recorded
// as turnframe.ActorRecovery, and returns their ids in enqueue order. A row
// whose lease runs after now is never touched. An expired row still holds
// its order key, and is never claimed again until Resolve moves it.
func (s *Store) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return nil, err
	}
	now = stamp(now)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	// Every move is made first and written after, so the call writes all
	// of them or none.
	var rows []*outboxRow
	var moved []turnframe.OutboxRecord
	for _, r := range s.sortedOutbox() {
		if !turnframe.LeaseEnded(r.rec, now) {
			continue
		}
		next, err := storekit.ExpireRow(r.rec, now)
		if err != nil {
			return nil, fmt.Errorf("memstore: expire: %w", err)
		}
		rows, moved = append(rows, r), append(moved, next)
	}
	ids := make([]turnframe.OutboxID, len(rows))
	for i, r := range rows {
		s.record(storekit.RowHistory(r.rec, moved[i], turnframe.ActorRecovery, "", now))
		r.rec = moved[i]
		ids[i] = r.rec.ID
	}
	return ids, nil
}

// ReleaseClaim moves one Dispatching row back to Pending at now by
// storekit.ReleaseRow, whether or not its lease ended, recorded as
// turnframe.ActorOperator. attempts, when not zero, fences it: the row
// must still be under the claim of that attempt number. ErrInvalid for a
// zero id, a negative attempts or a bad now; ErrNotFound for no such row,
// ErrConflict for a row that is not Dispatching or is under another claim.
func (s *Store) ReleaseClaim(ctx context.Context, id turnframe.OutboxID, attempts int, now time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckFence("attempts", attempts); err != nil {
		return err
	}
	if err := turnframe.CheckTime("now", now); err != nil {
		return err
	}
	now = stamp(now)
	return s.moveOutbox(ctx, "release claim", id, turnframe.ActorOperator, "", now, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
		return storekit.ReleaseRow(r, attempts, now)
	})
}
