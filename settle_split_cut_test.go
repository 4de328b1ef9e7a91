package turnframe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// cutBatchStore holds the sweep's first (lone) settlement until release; a
// batch of more than one waits for a lock until its try is cut at the
// leases' end; then the batch's first row (the victim) is answered busy a
// few times, and on its 5th single try another process's release runs
// (ExpireClaims at the clock's time) before the write. Lease extensions
// are refused as busy until the batch was cut (they waited on the lock too).
type cutBatchStore struct {
	turnframe.Store
	*splitGate
	clock *stepClock

	mu          sync.Mutex
	cut         bool
	victim      turnframe.OutboxID
	victimTries int
	extended    bool // the victim's lease was extended after the cut
	expired     []turnframe.OutboxID
}

func (s *cutBatchStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	if len(st) > 1 {
		s.mu.Lock()
		s.victim = st[0].Claim.ID
		s.mu.Unlock()
		<-ctx.Done() // waits on another session's lock until the try is cut
		s.mu.Lock()
		s.cut = true
		s.mu.Unlock()
		return nil, fmt.Errorf("lock wait: %w", turnframe.ErrBusy)
	}
	s.mu.Lock()
	victim := st[0].Claim.ID == s.victim
	if victim {
		s.victimTries++
	}
	n := s.victimTries
	s.mu.Unlock()
	if victim && n < 5 {
		return nil, fmt.Errorf("busy: %w", turnframe.ErrBusy)
	}
	if victim && n == 5 {
		// Another process's release: only a lease that ended (as the store has it) is expired.
		exp, err := s.Store.ExpireClaims(context.Background(), s.clock.read())
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		for _, e := range exp {
			s.expired = append(s.expired, e)
		}
		s.mu.Unlock()
	}
	return s.Store.Settle(ctx, st)
}

func (s *cutBatchStore) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.mu.Lock()
	cut := s.cut
	s.mu.Unlock()
	if !cut {
		return nil, fmt.Errorf("extend: lock wait: %w", turnframe.ErrBusy)
	}
	res, err := s.Store.ExtendClaims(ctx, claims, now, lease)
	if err == nil {
		s.mu.Lock()
		for i, c := range claims {
			if c.ID == s.victim && res[i] == nil {
				s.extended = true
			}
		}
		s.mu.Unlock()
	}
	return res, err
}

// DESIGN.md §8: "While RunOnce runs, a keeper extends the lease of every row
// it has not settled, every LeaseMargin/2"; "A settlement always lands. One
// refused as ErrBusy is tried again with backoff until it lands". A batch
// cut at its leases' end is written again row by row. The cut try used to
// take its rows out of the keeper's care (open): a single then refused as
// busy was retried under a live context with its lease never renewed, and
// a release took the row of a completed send, which was reported
// Unsettled and sent again. The keeper now extends them meanwhile.
func TestCutBatchSinglesKeepTheirLeases(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		clock := newStepClock(dispNow)
		store := &cutBatchStore{Store: inner, clock: clock, splitGate: newSplitGate()}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		cfg.SendTimeout, cfg.LeaseMargin = 10*time.Second, 2*time.Millisecond
		sender := store.sender(func() { // the last row: rows 1 and 2 are queued behind row 0's write
			clock.set(dispNow.Add(cfg.Lease() + time.Second)) // the leases have ended
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		store.mu.Lock()
		t.Logf("victim %v: tries %d, lease extended after the cut: %v, expired by the release: %v", store.victim, store.victimTries, store.extended, store.expired)
		store.mu.Unlock()
		t.Logf("report: completed %v unsettled %v", report.Completed, report.Unsettled)
		rec := dispGet(t, inner, store.victim)
		t.Logf("victim's row: %v (%s)", rec.Status, rec.LastCode)
		is.True(store.extended)                         // the keeper renewed the lease of a row whose write it still waits for
		is.Equal(report.Unsettled, nil)                 // every completed send settled
		is.Equal(rec.Status, turnframe.OutboxCompleted) // the victim's completed send recorded
	})
}
