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

// killIdle terminates the server backends of every idle connection of s's
// pool (a failover, a server restart, a proxy dropping idle connections)
// and returns once the server has let them go. The pool does not know: it
// pings a connection only after a second idle.
func killIdle(t *testing.T, s *pgstore.Store, killer *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	var pids []int64
	for _, c := range s.Pool().AcquireAllIdle(ctx) {
		pids = append(pids, int64(c.Conn().PgConn().PID()))
		c.Release()
	}
	if len(pids) == 0 {
		t.Fatal("no idle connection to kill")
	}
	if _, err := killer.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	for { // poll the server, never sleep
		var n int
		if err := killer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&n); err != nil {
			t.Fatalf("wait for the backends to go: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// eachClock runs f under both clocks: the fault must be classified the same
// whether or not a call reads the database's clock first (DatabaseClock, the
// default, reads it on the pool before its transaction begins).
func eachClock(t *testing.T, f func(t *testing.T, clock pgstore.Clock)) {
	for _, c := range []struct {
		name  string
		clock pgstore.Clock
	}{{"CallerClock", pgstore.CallerClock}, {"DatabaseClock", pgstore.DatabaseClock}} {
		t.Run(c.name, func(t *testing.T) { f(t, c.clock) })
	}
}

// oneRowAndAKiller opens a store on clock with one row enqueued at now, and
// a connection of its own to terminate the store's backends with (closed
// when the test ends).
func oneRowAndAKiller(t *testing.T, clock pgstore.Clock) (*pgstore.Store, *pgx.Conn, time.Time) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(clock))
	killer, err := pgx.Connect(ctx, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	t.Cleanup(func() { killer.Close(context.Background()) })
	now := onePayment(t, s)
	return s, killer, now
}

// DESIGN.md §8: "A settlement always lands. One refused as ErrBusy is
// tried again with backoff until it lands"; RunOnce: "a send whose outcome
// is known is never sent again because one write failed". §4: "ErrBusy —
// the one transient error: ... nothing was written, the same call may be
// tried again. Stores translate their driver's errors into these at their
// boundary."
//
// A connection the server dropped (a failover, a restart, an idle
// connection cut) before anything of the call's transaction reached it is
// such an error: the call is safe to try again. Given the raw driver error,
// the dispatcher would give the settlement up: a send the remote completed
// left Dispatching, Unsettled, expired to OutcomeUnknown once its lease
// ended, and sent again.
func TestASettlementOnADroppedConnectionLands(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, killer, now := oneRowAndAKiller(t, clock)

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
		rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(err)
		is.Equal(rows[0].Status, turnframe.OutboxCompleted) // and the row says so
	})
}

// The store-level face of the same: a call that met a connection the server
// had dropped, before anything of its transaction reached the server, is
// ErrBusy (nothing written, try again) — or simply succeeds on another
// connection — never a raw driver error.
func TestACallOnADroppedConnectionIsBusyOrLands(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, killer, now := oneRowAndAKiller(t, clock)
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
	})
}

// The same when the database cannot be reached for a moment (a failover's
// few seconds): the pool's new connection fails to open, nothing of the
// settlement was sent, and the dispatcher must be able to try again. Here
// the next 5 connection attempts fail, then the server is back.
func TestASettlementWhileTheServerIsUnreachableLands(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
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
		s, err := pgstore.New(ctx, pool, pgstore.WithClock(clock))
		is.NoErr(err)
		now := onePayment(t, s)

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
	})
}
