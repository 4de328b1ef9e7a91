package turnframe_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// landedKeeperStore writes a batch (its commit lands) but answers only once
// the try was cut. Extensions wait on the same lock until then (busy). Each
// single of the batch is answered busy until the keeper has tried to
// extend its row since the cut.
type landedKeeperStore struct {
	turnframe.Store
	*splitGate

	mu       sync.Mutex
	cut      bool
	batch    map[turnframe.OutboxID]bool
	extended map[turnframe.OutboxID]error // the keeper's answer for a batch row after the cut
}

func (s *landedKeeperStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.hold()
	if len(st) > 1 {
		if _, err := s.Store.Settle(context.WithoutCancel(ctx), st); err != nil {
			return nil, err
		}
		s.mu.Lock()
		for _, x := range st {
			s.batch[x.Claim.ID] = true
		}
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		s.cut = true
		s.mu.Unlock()
		return nil, fmt.Errorf("commit: %w", ctx.Err())
	}
	s.mu.Lock()
	_, seen := s.extended[st[0].Claim.ID]
	batch := s.batch[st[0].Claim.ID]
	s.mu.Unlock()
	if batch && !seen {
		return nil, fmt.Errorf("busy: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

func (s *landedKeeperStore) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
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
			if s.batch[c.ID] {
				s.extended[c.ID] = res[i]
			}
		}
		s.mu.Unlock()
	}
	return res, err
}

// A cut batch stays in the keeper's care while its rows are written alone.
// When its commit had landed after all, the keeper's extensions of those
// rows, which this sweep completed, come back ErrClaimLost, and it logged
// at error level, every tick, that each "may be sent twice". A claim the
// keeper finds lost is no longer extended, and for a row whose send is
// over its settlement tells what happened.
func TestCutBatchWhoseCommitLandedIsNeverCalledLostByTheKeeper(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		clock := newStepClock(dispNow)
		store := &landedKeeperStore{Store: inner, splitGate: newSplitGate(),
			batch: map[turnframe.OutboxID]bool{}, extended: map[turnframe.OutboxID]error{}}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 1
		cfg.SendTimeout, cfg.LeaseMargin = 10*time.Second, 2*time.Millisecond
		var mu sync.Mutex
		var errorsLogged []string
		logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), hook: func(msg string) {
			mu.Lock()
			defer mu.Unlock()
			errorsLogged = append(errorsLogged, msg)
		}})
		sender := store.sender(func() { clock.set(dispNow.Add(cfg.Lease() + time.Second)) }) // the try is bounded to a second
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read), turnframe.WithLogger(logger))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(len(report.Completed), 4) // each single found its row's move in the history
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range errorsLogged {
			is.True(msg != "turnframe: outbox row lost its claim while its send may run; it may be sent twice") // no row this sweep completed is said to be lost
		}
	})
}
