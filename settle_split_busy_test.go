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
	release chan struct{}
	called  chan struct{} // closed by the first Settle call: the settler took row 0 alone
	first   sync.Once
	mu      sync.Mutex
	lostID  turnframe.OutboxID
	batches int
	singles map[turnframe.OutboxID]int
}

func (s *busyBatchStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.first.Do(func() { close(s.called); <-s.release })
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

func TestBusyBatchEachRowItsOwnFate(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		for i, acct := range []turnframe.AccountID{"a", "b", "c", "d"} {
			dispEnqueue(t, inner, acct, turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), turnframe.OutboxMessage{Destination: "payments"})
		}
		store := &busyBatchStore{Store: inner, release: make(chan struct{}), called: make(chan struct{}), singles: map[turnframe.OutboxID]int{}}
		rec := &recorder{}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		n := 0
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			n++
			if n == 2 {
				<-store.called
			}
			if n == 4 {
				close(store.release)
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithObserver(rec))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		t.Logf("batches %d singles %v lost %v", store.batches, store.singles, store.lostID)
		t.Logf("report completed %v unsettled %v", report.Completed, report.Unsettled)
		is.Equal(store.batches, 1)
		is.Equal(len(report.Completed), 3)
		is.Equal(report.Unsettled, []turnframe.OutboxID{store.lostID})
		is.Equal(rec.count(turnframe.SignalOutboxCompleted), 3)
		for id, k := range store.singles {
			is.Equal(k, 1) // each single written once
			_ = id
		}
		hist := histOf(t, inner, turnframe.OutboxSubject(dispGet(t, inner, store.lostID).Account, store.lostID))
		t.Logf("history of the lost row: %d records", len(hist))
		for _, h := range hist {
			t.Logf("  %v", h)
		}
	})
}
