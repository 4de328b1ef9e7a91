package pgstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DESIGN.md §14: a connection "that broke before the COMMIT was sent (a
// failover, a server restart, an idle connection cut ...) is ErrBusy, so
// that a dispatcher's settlement is tried again and lands rather than being
// given up". The fix's tests ran in CallerClock; under the default clock
// (DatabaseClock) every Settle, ClaimDue, Resolve, Release, ExpireClaims and
// Begin first reads the database's clock on the pool, outside runTx, where a
// dropped connection is still a raw driver error.
func TestSettlementOnADroppedConnectionLandsUnderTheDatabaseClock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t) // the default clock: DatabaseClock
	killer, err := pgx.Connect(ctx, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	defer killer.Close(ctx)
	now := time.Now()
	is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", now, turnframe.OutboxMessage{Destination: "d"}))

	sends := 0
	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		sends++
		killIdle(t, s, killer) // the database fails over while the remote answers
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
	report, err := d.RunOnce(ctx, now)
	is.NoErr(err)
	is.Equal(sends, 1)
	t.Logf("report: %+v", report)
	is.Equal(len(report.Unsettled), 0) // the completed send's settlement landed
}

// The store-level face: Settle under the default clock on a pool whose idle
// connections the server dropped is a raw driver error, not ErrBusy.
func TestSettleOnADroppedConnectionIsBusyUnderTheDatabaseClock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	killer, err := pgx.Connect(ctx, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	defer killer.Close(ctx)
	now := time.Now()
	is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", now, turnframe.OutboxMessage{Destination: "d"}))
	claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1)

	killIdle(t, s, killer)
	res, err := s.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: now}})
	t.Logf("settle on a dropped connection: %v", err)
	if err != nil {
		is.True(errors.Is(err, turnframe.ErrBusy)) // the one transient error
		return
	}
	is.NoErr(res[0])
}

// The same when the server cannot be reached for a moment, under the
// default clock: the clock read's Acquire fails, nothing was sent, and the
// settlement must be tried again, not given up.
func TestSettlementWhileTheServerIsUnreachableLandsUnderTheDatabaseClock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
	is.NoErr(err)
	var down atomic.Int32
	cfg.BeforeConnect = func(ctx context.Context, _ *pgx.ConnConfig) error {
		if down.Load() > 0 {
			down.Add(-1)
			return errors.New("dial tcp: connection refused (the server is failing over)")
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	is.NoErr(err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool) // the default clock: DatabaseClock
	is.NoErr(err)
	now := time.Now()
	is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", now, turnframe.OutboxMessage{Destination: "d"}))

	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		for _, c := range pool.AcquireAllIdle(ctx) { // the server goes away with every connection
			c.Conn().Close(ctx)
			c.Release()
		}
		down.Store(5)
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
	report, err := d.RunOnce(ctx, now)
	is.NoErr(err)
	t.Logf("report: %+v", report)
	is.Equal(len(report.Unsettled), 0) // the completed send's settlement landed once the server was back
}
