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

// lockedOnce is a store in which another session holds the row's lock
// through the first try of its settlement: that try waits until it is cut.
// It waits first for the keeper to follow the wall clock's step (followed,
// closed once an extension landed after the step).
type lockedOnce struct {
	turnframe.Store
	clk      *osClock
	settles  atomic.Int32
	once     sync.Once
	followed chan struct{}
}

func (s *lockedOnce) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	res, err := s.Store.ExtendClaims(ctx, claims, now, lease)
	if err == nil && len(res) == 1 && res[0] == nil && s.clk.step.Load() != 0 {
		s.once.Do(func() { close(s.followed) })
	}
	return res, err
}

func (s *lockedOnce) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	if s.settles.Add(1) == 1 {
		<-s.followed
		<-ctx.Done() // the lock is held until this try gives up
		return nil, ctx.Err()
	}
	return s.Store.Settle(ctx, settlements)
}

// DESIGN.md, "One clock": a sweep whose caller's context ended "goes on
// looking until its settlements are written, and it and that catch-up move
// its leases to the instant they end on the real clock, so a step does not
// cut its last settlements short". The keeper moved the lease, but the try
// under way had been bounded by the lease as the step left it (a second),
// and a try cut after the caller's context ended was given up at once: the
// row was left Dispatching though its lease still ran, for a release to
// take once it ended and send again.
func TestAStepDoesNotCutACancelledSweepsLastSettlementShort(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		clk := &osClock{}
		store := &lockedOnce{Store: inner, clk: clk, followed: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			cancel()                             // the application shuts down as the send returns
			clk.step.Store(int64(2 * time.Hour)) // and the wall clock steps forward
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.SendTimeout, cfg.LeaseMargin = 4*time.Second, time.Second // a lease of 5 s: a second is not all it has left
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(slog.New(slog.DiscardHandler)), turnframe.WithClock(clk.read))
		report := await(t, runOnceAsync(t, d, ctx, clk.read()), "RunOnce returns")
		is.Equal(report.Unsettled, nil)                                              // the settlement was written again while the lease ran
		is.True(dispGet(t, inner, rows[0].ID).Status != turnframe.OutboxDispatching) // not left for a release to send again
		is.True(store.settles.Load() >= 2)                                           // after the cut try
	})
}
