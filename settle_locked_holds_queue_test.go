package turnframe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// lockedFirstStore answers the first row's settlement busy (another
// session keeps its row locked) until the other row's settlement landed,
// or it was tried 8 times (about 1.3 s of the settler's backoff). It
// records the order in which settlements landed.
type lockedFirstStore struct {
	turnframe.Store
	mu     sync.Mutex
	locked turnframe.OutboxID
	tries  int
	tried  chan struct{} // closed at the locked row's first try
	once   sync.Once
	landed []turnframe.OutboxID
}

func (s *lockedFirstStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	if s.locked == (turnframe.OutboxID{}) {
		s.locked = st[0].Claim.ID
	}
	for _, x := range st {
		if x.Claim.ID == s.locked {
			s.tries++
			s.once.Do(func() { close(s.tried) })
			othersDone := len(s.landed) > 0
			if !othersDone && s.tries < 8 {
				s.mu.Unlock()
				return nil, fmt.Errorf("lock wait: %w", turnframe.ErrBusy)
			}
		}
	}
	s.mu.Unlock()
	res, err := s.Store.Settle(ctx, st)
	if err == nil {
		s.mu.Lock()
		for i, x := range st {
			if res[i] == nil {
				s.landed = append(s.landed, x.Claim.ID)
			}
		}
		s.mu.Unlock()
	}
	return res, err
}

// DESIGN.md §8, Group commit: a row another session keeps locked holds up
// no other. The settler used to try a busy settlement again itself, so
// every settlement queued after it waited — on PostgreSQL until that row's
// lease ended (a minute by default) — the other rows' completed sends
// unrecorded meanwhile, their leases hanging on the keeper alone. A
// settlement refused as busy is now tried again apart from the settler.
func TestALockedRowsSettlementHoldsUpNoLaterSettlement(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		for i, acct := range []turnframe.AccountID{"a", "b"} {
			dispEnqueue(t, inner, acct, turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), turnframe.OutboxMessage{Destination: "payments"})
		}
		store := &lockedFirstStore{Store: inner, tried: make(chan struct{})}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 2
		var mu sync.Mutex
		first := true
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			me := first
			first = false
			mu.Unlock()
			if !me {
				<-store.tried // the other row answers once the first one's settlement waits on its lock
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		report, err := turnframe.NewDispatcher(store, sender, cfg).RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		store.mu.Lock()
		defer store.mu.Unlock()
		t.Logf("locked row %v tried %d times; landed in order %v; report completed %v", store.locked, store.tries, store.landed, report.Completed)
		is.Equal(len(store.landed), 2)
		is.True(store.landed[0] != store.locked) // the free row's settlement did not wait for the locked one's
	})
}
