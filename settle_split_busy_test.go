package turnframe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// busyBatchStore holds the first (lone) settlement until release; a batch
// answers per-row results (the last row ErrClaimLost) and the call ErrBusy;
// each single then lands, except the last row's, which the store answers
// ErrClaimLost (another worker took it).
type busyBatchStore struct {
	turnframe.Store
	*splitGate
	mu      sync.Mutex
	lostID  turnframe.OutboxID
	batches int
	singles map[turnframe.OutboxID]int
}

func (s *busyBatchStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(st) > 1 {
		s.batches++
		if s.lostID == (turnframe.OutboxID{}) {
			s.lostID = st[len(st)-1].Claim.ID
		}
		res := make([]error, len(st))
		res[len(st)-1] = turnframe.ErrClaimLost
		return res, fmt.Errorf("batch: %w", turnframe.ErrBusy)
	}
	s.singles[st[0].Claim.ID]++
	if st[0].Claim.ID == s.lostID {
		return []error{fmt.Errorf("taken: %w", turnframe.ErrClaimLost)}, nil
	}
	return s.Store.Settle(ctx, st)
}

// DESIGN.md §8: a settlement batch refused as busy is written again one row
// at a time, and each row gets its own fate: three land, counted once each;
// the one another worker took is reported Unsettled.
func TestBusyBatchEachRowItsOwnFate(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		store := &busyBatchStore{Store: inner, splitGate: newSplitGate(), singles: map[turnframe.OutboxID]int{}}
		rec := &recorder{}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		d := turnframe.NewDispatcher(store, store.sender(nil), cfg, turnframe.WithObserver(rec))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		t.Logf("batches %d singles %v lost %v", store.batches, store.singles, store.lostID)
		t.Logf("report completed %v unsettled %v", report.Completed, report.Unsettled)
		is.Equal(store.batches, 1)
		is.Equal(len(report.Completed), 3)
		is.Equal(report.Unsettled, []turnframe.OutboxID{store.lostID})
		is.Equal(rec.count(turnframe.SignalOutboxCompleted), 3)
		for _, k := range store.singles {
			is.Equal(k, 1) // each single written once
		}
		hist := histOf(t, inner, turnframe.OutboxSubject(dispGet(t, inner, store.lostID).Account, store.lostID))
		t.Logf("history of the lost row: %d records", len(hist))
		for _, h := range hist {
			t.Logf("  %v", h)
		}
	})
}
