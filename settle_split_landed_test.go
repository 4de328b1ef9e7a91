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

// landedCutStore holds the first (lone) settlement until release; a batch is
// written (its commit lands) but its answer comes only once the try's
// context ended: a commit whose acknowledgement was cut off.
type landedCutStore struct {
	turnframe.Store
	*splitGate
	mu    sync.Mutex
	batch []turnframe.OutboxID
}

func (s *landedCutStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	if len(st) > 1 {
		if _, err := s.Store.Settle(context.WithoutCancel(ctx), st); err != nil {
			return nil, err
		}
		s.mu.Lock()
		for _, x := range st {
			s.batch = append(s.batch, x.Claim.ID)
		}
		s.mu.Unlock()
		<-ctx.Done()
		return nil, fmt.Errorf("commit: %w", ctx.Err())
	}
	return s.Store.Settle(ctx, st)
}

// RunOnce's doc: "RunOnce returns when every claimed row is settled or
// reported Unsettled"; DESIGN §8: "A send refused as ErrClaimLost is
// recorded in the row's history as evidence". A cut batch whose commit
// landed is written again row by row; each single found its own row
// settled and was answered ErrClaimLost, and the row — Completed by this
// very sweep — was reported Unsettled, logged "settle it by hand", and got
// a late_answer record saying its claim was lost. A single refused so now
// reads its row first: one that stands as its settlement makes it landed.
func TestCutBatchWhoseCommitLandedIsNotReportedLost(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		clock := newStepClock(dispNow)
		store := &landedCutStore{Store: inner, splitGate: newSplitGate()}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		sender := store.sender(func() {
			clock.set(dispNow.Add(cfg.Lease() + time.Second)) // the try is bounded to a second
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		t.Logf("batch %v; report completed %v unsettled %v", store.batch, report.Completed, report.Unsettled)
		for _, id := range report.Unsettled {
			rec := dispGet(t, inner, id)
			for _, h := range histOf(t, inner, turnframe.OutboxSubject(rec.Account, id)) {
				t.Logf("  %v history: %v", id, h)
			}
			is.True(rec.Status != turnframe.OutboxCompleted) // a row reported Unsettled is not one this sweep completed
		}
	})
}
