package turnframe_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// stalledExtends is a store whose lease extensions, once the wall clock
// stepped, wait for their context's end (a connection that stalls): its
// settlements wait for the first such extension, then land.
type stalledExtends struct {
	turnframe.Store
	clk      *osClock
	once     sync.Once
	followed chan struct{} // closed at the first extension after the step
}

func (s *stalledExtends) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if s.clk.step.Load() == 0 {
		return s.Store.ExtendClaims(ctx, claims, now, lease)
	}
	s.once.Do(func() { close(s.followed) })
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stalledExtends) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	<-s.followed // the keeper follows the step first
	return s.Store.Settle(context.WithoutCancel(ctx), settlements)
}

// A cancelled RunOnce "returns soon after its leases end": its keeper goes
// on looking after the caller's context ended only to move the leases "to
// the instant they end on the real clock". Each row's move was bounded as
// a lease write is (what is left of its lease on the wall clock, at least a
// second) and the rows were moved one after the other, so a store whose
// extensions stall held the keeper, and RunOnce with it, a second a row
// after every settlement had landed, long past the leases.
func TestACancelledSweepsKeeperIsBoundedByItsLeasesWhenExtensionsStall(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		const n = 40
		rows := dispEnqueue(t, inner, "acme", "k1", dispMessages(n, "payments", "")...)
		is.Equal(len(rows), n)
		clk := &osClock{}
		store := &stalledExtends{Store: inner, clk: clk, followed: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var sent atomic.Int32
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			if sent.Add(1) == n {
				cancel()                             // the application shuts down as the last send returns
				clk.step.Store(int64(2 * time.Hour)) // and the wall clock steps forward
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.BatchSize, cfg.Concurrency = n, n
		cfg.SendTimeout, cfg.LeaseMargin = 2*time.Second, time.Second // leases of 3 s
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(slog.New(slog.DiscardHandler)), turnframe.WithClock(clk.read))
		done := runOnceAsync(t, d, ctx, clk.read())
		report := await(t, done, "the cancelled RunOnce returns once its leases ended")
		is.Equal(int(sent.Load()), n)   // every row was sent
		is.Equal(report.Unsettled, nil) // and settled
		for _, r := range rows {
			is.True(dispGet(t, inner, r.ID).Status != turnframe.OutboxDispatching) // each settled as its send said
		}
	})
}
