package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

type orderKey struct {
	account turnframe.AccountID
	key     string
}

// ClaimDue moves at most limit due rows to Dispatching under worker, leased
// until now + lease (storekit.ClaimRow), and returns them in claim order:
// due time, then enqueue order. A row is due when it is Pending, its due
// time is not after now, and no earlier row of its account and non-empty
// order key holds the order (judged on the rows as they were before this
// claim).
func (s *Store) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	if err := turnframe.CheckClaim(now, limit, worker, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	held := make(map[orderKey]bool)
	var due []*outboxRow
	for _, r := range s.sortedOutbox() {
		ok := orderKey{r.rec.Account, r.rec.OrderKey}
		blocked := r.rec.OrderKey != "" && held[ok]
		if r.rec.Status == turnframe.OutboxPending && !r.rec.DueAt.After(now) && !blocked {
			due = append(due, r)
		}
		if r.rec.OrderKey != "" && r.rec.Status.HoldsOrder() {
			held[ok] = true
		}
	}
	slices.SortFunc(due, func(a, b *outboxRow) int {
		if c := a.rec.DueAt.Compare(b.rec.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if len(due) > limit {
		due = due[:limit]
	}
	claims := make([]turnframe.Claim, 0, len(due))
	for _, r := range due {
		var c turnframe.Claim
		before := r.rec
		r.rec, c = storekit.ClaimRow(r.rec, worker, now, lease)
		r.rec.LeaseUntil = stamp(r.rec.LeaseUntil)
		s.record(storekit.RowHistory(before, r.rec, turnframe.WorkerActor(worker), "", now))
		c.LeaseUntil = r.rec.LeaseUntil
		c.Payload = slices.Clone(c.Payload)
		claims = append(claims, c)
	}
	return claims, nil
}

// settle applies one validated settlement and records it as
// OutboxSettlement.SettledBy names it; the caller holds the lock.
func (s *Store) settle(st turnframe.OutboxSettlement) error {
	st.Now, st.RetryAt = stamp(st.Now), stamp(st.RetryAt)
	r, ok := s.outbox[st.Claim.ID]
	if !ok {
		// A row that is gone (pruned after it was settled) is not held by
		// any claim: the OutboxStore contract refuses every settlement
		// without the claim with ErrClaimLost.
		return fmt.Errorf("memstore: settle: outbox row %v does not exist: %w", st.Claim.ID, turnframe.ErrClaimLost)
	}
	next, err := storekit.SettleRow(r.rec, st)
	if err != nil {
		return fmt.Errorf("memstore: settle: %w", err)
	}
	s.record(storekit.RowHistory(r.rec, next, st.SettledBy(), st.Note, st.Now))
	r.rec = next
	return nil
}

// Settle applies several settlements at once; results[i] is the outcome of
// settlements[i] alone.
func (s *Store) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	results := make([]error, len(settlements))
	valid := make([]bool, len(settlements))
	for i, st := range settlements {
		results[i] = st.Validate()
		valid[i] = results[i] == nil
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	for i, st := range settlements {
		if valid[i] {
			results[i] = s.settle(st)
		}
	}
	return results, nil
}

// ExtendClaims moves the lease of each claimed row to now + lease by
// storekit.ExtendRow, never backwards. results[i] is nil, or ErrClaimLost
// for claims[i] alone when its row is no longer Dispatching under it (or is
// gone); such a row does not change. err is for the call as a whole: bad
// input, a closed store or an ended context, and then nothing changed.
func (s *Store) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if err := turnframe.CheckExtend(claims, now, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	results := make([]error, len(claims))
	for i, c := range claims {
		r, ok := s.outbox[c.ID]
		if !ok {
			results[i] = fmt.Errorf("memstore: extend: outbox row %v does not exist: %w", c.ID, turnframe.ErrClaimLost)
			continue
		}
		next, err := storekit.ExtendRow(r.rec, c, now, lease)
		if err != nil {
			results[i] = fmt.Errorf("memstore: extend: %w", err)
			continue
		}
		next.LeaseUntil = stamp(next.LeaseUntil)
		r.rec = next
	}
	return results, nil
}

// GetOutbox returns one row. ErrNotFound if it does not exist.
func (s *Store) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	if err := turnframe.CheckID("id", id); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	if err := s.lock(ctx); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.outbox[id]
	if !ok {
		return turnframe.OutboxRecord{}, fmt.Errorf("memstore: outbox row %v: %w", id, turnframe.ErrNotFound)
	}
	return copyRecord(r.rec), nil
}

// ListOutbox returns at most filter.Limit rows matching filter, in enqueue
// order; with filter.After, only rows enqueued after that one, and
// ErrNotFound when it does not exist or, with filter.Account, belongs to
// another account.
func (s *Store) ListOutbox(ctx context.Context, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	rows := s.sortedOutbox()
	if !filter.After.IsZero() {
		i := slices.IndexFunc(rows, func(r *outboxRow) bool {
			return r.rec.ID == filter.After && (filter.Account == "" || r.rec.Account == filter.Account)
		})
		if i < 0 {
			return nil, fmt.Errorf("memstore: list outbox after row %v: %w", filter.After, turnframe.ErrNotFound)
		}
		rows = rows[i+1:]
	}
	var out []turnframe.OutboxRecord
	for _, r := range rows {
		if len(out) == filter.Limit {
			break
		}
		if filter.Status != 0 && r.rec.Status != filter.Status {
			continue
		}
		if filter.Account != "" && r.rec.Account != filter.Account {
			continue
		}
		out = append(out, copyRecord(r.rec))
	}
	return out, nil
}

// Prune deletes Completed and Failed rows finished before finishedBefore,
// with their history, and returns how many. Journal keys and their history,
// and turns' history, are never deleted.
func (s *Store) Prune(ctx context.Context, finishedBefore time.Time) (int, error) {
	if err := turnframe.CheckTime("finished_before", finishedBefore); err != nil {
		return 0, err
	}
	finishedBefore = stamp(finishedBefore)
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.outbox {
		if storekit.Prunable(r.rec, finishedBefore) {
			delete(s.outbox, id)
			delete(s.rowKeys, rowKey{r.rec.Account, r.rec.Key})
			delete(s.history, turnframe.OutboxSubject(r.rec.Account, id))
			n++
		}
	}
	return n, nil
}
