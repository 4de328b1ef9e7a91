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

// frozenPool returns the config of a pool on a fresh schema whose next
// connections handed out, as many as the counter it returns holds, are
// read-only (default_transaction_read_only: what a hot standby, a
// database an operator froze, or a failover's old primary answers with
// 25006), and the rest not.
func frozenPool(t *testing.T) (*pgxpool.Config, *atomic.Int32) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	var frozen atomic.Int32
	cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		on := "off"
		if frozen.Add(-1) >= 0 {
			on = "on"
		} else {
			frozen.Store(0)
		}
		_, err := c.Exec(ctx, "SET default_transaction_read_only = "+on)
		return err == nil, err
	}
	return cfg, &frozen
}

// DESIGN.md §8: "A settlement always lands. One refused as ErrBusy is tried
// again with backoff until it lands". A write refused because the session
// is read-only (SQLSTATE 25006: a hot standby reached during a failover
// before its promotion, a primary an operator froze for a moment) wrote
// nothing and may be made again, as one refused for a lost connection. It
// came back as the driver's error, which the dispatcher does not try
// again: a send the remote completed was given up for a few read-only
// seconds, its row left Dispatching, expired to unknown at its lease's
// end and sent again (or escalated to a person).
func TestACompletedSendsSettlementOutlastsAReadOnlyMoment(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		cfg, frozen := frozenPool(t)
		s := storeOnPool(t, cfg, clock)
		now := onePayment(t, s)
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			frozen.Store(3) // the database is read-only while the remote answers, and a little after
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		report, err := d.RunOnce(ctx, now)
		is.NoErr(err)
		t.Logf("report: %+v", report)
		is.Equal(len(report.Unsettled), 0)                       // the completed send's settlement landed once it could
		is.Equal(theRow(t, s).Status, turnframe.OutboxCompleted) // and the row says so
	})
}

// The store-level face: a write on a read-only session is ErrBusy, and
// nothing of it was written.
func TestAWriteOnAReadOnlySessionIsBusy(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	cfg, frozen := frozenPool(t)
	s := storeOnPool(t, cfg, pgstore.CallerClock)
	now := onePayment(t, s)
	frozen.Store(1000)
	claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
	t.Logf("a claim on a read-only session: %v", err)
	is.True(errors.Is(err, turnframe.ErrBusy)) // try again: nothing is wrong with the call
	is.Equal(len(claims), 0)
	frozen.Store(0)
	is.Equal(theRow(t, s).Status, turnframe.OutboxPending) // nothing written
}
