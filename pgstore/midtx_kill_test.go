package pgstore_test

import (
	"context"
	"errors"
	"sync"
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

// commitKiller is a pgx tracer that, once armed, terminates the server
// backend of the next batch that ends with the COMMIT, just before the
// batch is sent, and waits until the server has let it go: the session
// dies while it is idle in its transaction (a failover, a server restart,
// idle_in_transaction_session_timeout, an operator's pg_terminate_backend)
// after every statement but the last round trip ran. Nothing of that round
// trip reaches a live server, so nothing of the transaction commits.
type commitKiller struct {
	t      *testing.T
	killer *pgx.Conn
	mu     sync.Mutex // the killer connection is one session
	armed  atomic.Bool
	killed atomic.Int64
}

func (k *commitKiller) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (k *commitKiller) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (k *commitKiller) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	qs := d.Batch.QueuedQueries
	if len(qs) < 2 || qs[len(qs)-1].SQL != "commit" || !k.armed.CompareAndSwap(true, false) {
		return ctx
	}
	pid := c.PgConn().PID()
	k.mu.Lock()
	defer k.mu.Unlock()
	bg := context.Background()
	if _, err := k.killer.Exec(bg, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		k.t.Errorf("terminate: %v", err)
		return ctx
	}
	for { // poll the server, never sleep
		var n int
		if err := k.killer.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			k.t.Errorf("wait for the backend to go: %v", err)
			return ctx
		}
		if n == 0 {
			k.killed.Add(1)
			return ctx
		}
	}
}

func (k *commitKiller) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (k *commitKiller) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// killerStore opens a store on clock on a pool of its own whose sessions
// the returned commitKiller ends before their last round trip, once armed.
func killerStore(t *testing.T, clock pgstore.Clock) (*pgstore.Store, *commitKiller) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse url: %v", err)
	}
	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("killer: %v", err)
	}
	t.Cleanup(func() { killer.Close(context.Background()) })
	k := &commitKiller{t: t, killer: killer}
	cfg.ConnConfig.Tracer = k
	return storeOnPool(t, cfg, clock), k
}

// onePayment enqueues one row of acme's, due at now, on s, and returns
// now: the row the tests of a cut or killed session claim and settle.
func onePayment(t *testing.T, s *pgstore.Store) time.Time {
	t.Helper()
	now := time.Now()
	if err := enqueueRows(context.Background(), s, turnframe.NewIDGenerator(), "acme", "pay", now,
		turnframe.OutboxMessage{Destination: "d"}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return now
}

// theRow returns the one outbox row of s (onePayment's).
func theRow(t *testing.T, s *pgstore.Store) turnframe.OutboxRecord {
	t.Helper()
	rows, err := s.ListOutbox(context.Background(), turnframe.OutboxFilter{Limit: 10})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list the outbox: %v (%d rows, not 1)", err, len(rows))
	}
	return rows[0]
}

// DESIGN.md §14: "a connection that could not be opened or that broke
// before the COMMIT was sent (a failover, a server restart, an idle
// connection cut: the server rolled the transaction back)" is ErrBusy,
// "so that a dispatcher's settlement is tried again and lands rather than
// being given up".
//
// A session that dies between the settlement's round trips — after it
// locked and wrote the row, before its last round trip (the history and
// the COMMIT, one pipeline) — rolled back as surely as one that died idle
// in the pool: the server was gone before the COMMIT was sent. It was
// reported as a COMMIT whose outcome is unknown, not ErrBusy, so the
// dispatcher gave the completed send's settlement up: the row stayed
// Dispatching, Unsettled, to be expired to OutcomeUnknown once its lease
// ended and sent again.
func TestASettlementWhoseSessionDiesBeforeItsCommitLands(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := killerStore(t, clock)
		now := onePayment(t, s)

		sends := 0
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sends++
			k.armed.Store(true) // the settlement's session dies before its COMMIT
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		report, err := d.RunOnce(ctx, now)
		is.NoErr(err)
		is.Equal(sends, 1)
		is.Equal(k.killed.Load(), int64(1)) // a session was killed mid-transaction
		t.Logf("report: %+v", report)
		is.Equal(len(report.Unsettled), 0)                       // the completed send's settlement landed
		is.Equal(theRow(t, s).Status, turnframe.OutboxCompleted) // and the row says so
	})
}

// The store-level face: a write whose session dies before its last round
// trip is run again on another connection and lands, or is ErrBusy
// (nothing written, try again) — never a raw driver error that leaves the
// caller not knowing whether it committed.
func TestAWriteWhoseSessionDiesBeforeItsCommitLandsOrIsBusy(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := killerStore(t, clock)
		now := onePayment(t, s)

		k.armed.Store(true)
		claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
		is.Equal(k.killed.Load(), int64(1))
		t.Logf("claim: %v", err)
		if err != nil {
			is.True(errors.Is(err, turnframe.ErrBusy)) // the claim: nothing written, try again
			claims, err = s.ClaimDue(ctx, now, 10, "w", time.Minute)
			is.NoErr(err)
		}
		is.Equal(len(claims), 1)

		k.armed.Store(true)
		settle := []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: now}}
		res, err := s.Settle(ctx, settle)
		is.Equal(k.killed.Load(), int64(2))
		t.Logf("settle: %v", err)
		if err != nil {
			is.True(errors.Is(err, turnframe.ErrBusy)) // the settlement: nothing written, try again
			res, err = s.Settle(ctx, settle)
			is.NoErr(err)
		}
		is.NoErr(res[0]) // the claim held: the killed try wrote nothing
		row := theRow(t, s)
		is.Equal(row.Status, turnframe.OutboxCompleted)
		is.Equal(row.Attempts, 1) // claimed once
	})
}
