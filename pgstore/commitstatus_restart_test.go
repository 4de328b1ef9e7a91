package pgstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// askKiller is an answerCutter whose first question about a transaction
// (pg_xact_status) is asked on a connection the server has just ended, as
// every pooled connection is after a restart or a failover: the one that
// lost the COMMIT's answer is rarely the only one.
type askKiller struct {
	*answerCutter
	t      *testing.T
	killer *pgx.Conn
	killed atomic.Int64
}

func (k *askKiller) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_xact_status") && k.killed.CompareAndSwap(0, 1) {
		pid := c.PgConn().PID()
		if _, err := k.killer.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
			k.t.Errorf("terminate: %v", err)
		}
		waitGone(k.t, k.killer, pid)
	}
	return k.answerCutter.TraceQueryStart(ctx, c, d)
}

// waitGone returns once the server has let the backend pid go.
func waitGone(t *testing.T, killer *pgx.Conn, pid uint32) {
	for { // poll the server, never sleep
		var n int
		if err := killer.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			t.Errorf("wait for the backend to go: %v", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

// askKillerStore is cutterStore whose first question about a transaction
// is asked on a connection the server has just ended (askKiller).
func askKillerStore(t *testing.T, clock pgstore.Clock) (*pgstore.Store, *askKiller) {
	t.Helper()
	cfg, k := cutterConfig(t)
	killer, err := pgx.Connect(context.Background(), cfg.ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killer.Close(context.Background()) })
	ak := &askKiller{answerCutter: k, t: t, killer: killer}
	cfg.ConnConfig.Tracer = ak
	return storeOnPool(t, cfg, clock), ak
}

// A write whose COMMIT ran while its answer was lost is asked about on
// another connection (pg_xact_status, §26 row 1). When the answer was lost
// to a server restart or a failover, the pool's other connections died with
// it, and the question was asked once, on one of them: it failed, and the
// store returned the outcome as unknown at once. For a claim that landed,
// the dispatcher held no claim and sent nothing, while the row stood
// Dispatching under its worker: at the lease's end it was expired to
// OutcomeUnknown, a send that never happened escalated. A question whose
// own connection is lost is now asked again, on a new one, within the same
// bound.
func TestAClaimWhoseCommitAnswerIsLostInARestartIsNeverAnUnknownOutcome(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := askKillerStore(t, clock)
		now := onePayment(t, s)

		var sends atomic.Int64
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sends.Add(1)
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		k.armed.Store(true) // the claim's COMMIT runs, its answer is lost
		report, err := d.RunOnce(ctx, now)
		t.Logf("RunOnce with its claim's answer cut: %+v, %v (sends %d)", report, err, sends.Load())
		is.Equal(k.cut.Load(), int64(1))    // the claim's answer was cut
		is.Equal(k.killed.Load(), int64(1)) // and the first question's connection ended

		later := now.Add(d.Config().Lease() + time.Minute) // every lease the claim could have given ended
		_, err = s.ExpireClaims(ctx, later)
		is.NoErr(err)
		_, err = d.RunOnce(ctx, later)
		is.NoErr(err)
		row := theRow(t, s)
		t.Logf("row: %v, code %q; sends %d", row.Status, row.LastCode, sends.Load())
		is.True(row.Status != turnframe.OutboxOutcomeUnknown) // never sent, never unknown
		is.Equal(sends.Load(), int64(1))                      // sent, once
		is.Equal(row.Status, turnframe.OutboxCompleted)       // and settled
	})
}

// The settlement's face: one whose COMMIT landed while its answer was lost
// in a restart was reported Unsettled, for a person to settle, though the
// row was Completed (RunOnce reports a row Unsettled only when the store
// refused its settlement for good).
func TestASettlementWhoseCommitAnswerIsLostInARestartIsReportedSettled(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := askKillerStore(t, clock)
		now := onePayment(t, s)

		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			k.armed.Store(true) // the settlement's COMMIT runs, its answer is lost
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		report, err := d.RunOnce(ctx, now)
		t.Logf("RunOnce with its settlement's answer cut: %+v, %v", report, err)
		is.Equal(k.cut.Load(), int64(1))                         // the settlement's answer was cut
		is.Equal(k.killed.Load(), int64(1))                      // and the first question's connection ended
		is.Equal(theRow(t, s).Status, turnframe.OutboxCompleted) // the settlement landed
		is.NoErr(err)
		is.Equal(len(report.Unsettled), 0) // and is reported as it landed
		is.Equal(len(report.Completed), 1)
	})
}
