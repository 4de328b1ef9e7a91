package turnframe_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// retryable answers every send as a 503: the row goes back Pending, due
// after a backoff, its last code http.503.
func retryable(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
	return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}
}

// reclaimedCutStore writes a batch (its commit lands) but answers only once
// the try was cut; in between, another dispatcher (w2) claims the rows the
// batch put back Pending, due again by then.
type reclaimedCutStore struct {
	turnframe.Store
	*splitGate
	mu        sync.Mutex
	reclaimed []turnframe.OutboxID
}

func (s *reclaimedCutStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	if len(st) == 1 {
		return s.Store.Settle(ctx, st)
	}
	if _, err := s.Store.Settle(context.WithoutCancel(ctx), st); err != nil {
		return nil, err
	}
	claims, err := s.Store.ClaimDue(context.Background(), dispNow.Add(time.Hour), 10, "w2", time.Minute)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, c := range claims {
		s.reclaimed = append(s.reclaimed, c.ID)
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, fmt.Errorf("commit: %w", ctx.Err())
}

// DispatchReport.Unsettled lists rows "the store refused their settlement
// for good". A cut batch whose commit landed is written again row by row,
// and a single refused as ErrClaimLost asks whether its batch landed. That
// used to be read from the row as it stands, which another dispatcher had
// claimed since: a settlement that landed was reported Unsettled, logged
// "settle it by hand", and the new holder's live claim got a late_answer.
func TestCutBatchLandedThenReclaimedIsNotReportedLost(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		clock := newStepClock(dispNow)
		store := &reclaimedCutStore{Store: inner, splitGate: newSplitGate()}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		gated := store.sender(func() { clock.set(dispNow.Add(cfg.Lease() + time.Second)) }) // the try is bounded to a second
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			gated.Send(ctx, e)
			return retryable(ctx, e)
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		t.Logf("reclaimed by w2 %v; report retried %v unsettled %v", store.reclaimed, report.Retried, report.Unsettled)
		is.True(len(store.reclaimed) > 0) // the set-up: w2 took rows the batch had settled
		is.Equal(report.Unsettled, nil)   // every row's settlement landed
		is.Equal(len(report.Retried), 4)
		for _, id := range store.reclaimed {
			rec := dispGet(t, inner, id)
			is.Equal(len(evidenceOf(t, inner, turnframe.OutboxSubject(rec.Account, id), turnframe.CodeLateAnswer)), 0) // no false late answer on w2's claim
		}
	})
}

// releasedCutStore cuts a batch's try (nothing written) and, meanwhile, an
// operator releases its rows (turnframe release --force: ReleaseClaim).
type releasedCutStore struct {
	turnframe.Store
	*splitGate
	mu       sync.Mutex
	released []turnframe.OutboxID
}

func (s *releasedCutStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	if len(st) == 1 {
		return s.Store.Settle(ctx, st)
	}
	<-ctx.Done() // waits on another session's lock until the try is cut
	for _, x := range st {
		if err := s.Store.ReleaseClaim(context.Background(), x.Claim.ID, x.Claim.Attempts, x.Now.Add(time.Hour)); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.released = append(s.released, x.Claim.ID)
		s.mu.Unlock()
	}
	return nil, fmt.Errorf("lock wait: %w", turnframe.ErrBusy)
}

// DESIGN.md §8: a send refused as ErrClaimLost is recorded in the row's
// history as evidence. A row an operator released to Pending keeps its
// last code; when this send's code was the same (http.503 twice), the row
// "stood as the settlement makes it": the refused settlement was reported
// Retried and its answer recorded nowhere.
func TestCutBatchReleasedByAnOperatorIsNotReportedLanded(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		first, err := turnframe.NewDispatcher(inner, turnframe.SenderFunc(retryable), cfg).RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(len(first.Retried), 4) // attempt 1 of each: Pending again, last code http.503

		later := dispNow.Add(time.Hour)
		clock := newStepClock(later)
		store := &releasedCutStore{Store: inner, splitGate: newSplitGate()}
		gated := store.sender(func() { clock.set(later.Add(cfg.Lease() + time.Second)) }) // the try is bounded to a second
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			gated.Send(ctx, e)
			return retryable(ctx, e)
		})
		report, err := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read)).RunOnce(context.Background(), later)
		is.NoErr(err)
		t.Logf("released by the operator %v; report retried %v unsettled %v", store.released, report.Retried, report.Unsettled)
		is.True(len(store.released) > 0) // the set-up
		for _, id := range store.released {
			rec := dispGet(t, inner, id)
			is.Equal(len(evidenceOf(t, inner, turnframe.OutboxSubject(rec.Account, id), turnframe.CodeLateAnswer)), 1) // the refused send's answer is on record
			is.True(!slices.Contains(report.Retried, id))                                                              // not reported settled by this sweep
			is.True(slices.Contains(report.Unsettled, id))                                                             // but refused
		}
	})
}
