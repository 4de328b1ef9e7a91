package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
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

// answerCutter breaks, once armed, the next connection of its pool that
// receives the server's answer to a COMMIT that succeeded (the command tag
// COMMIT): the answer never reaches pgx, the connection is closed under
// it. The transaction committed on the server; the client cannot know (a
// network cut, a failover, a proxy restarting, just as the COMMIT ran).
// With sendArmed it instead loses the next COMMIT on its way, sent alone
// or as the last statement of a batch (pgx's write succeeds, nothing
// reaches the server, the connection closes): the server rolls the
// transaction back, and the client cannot know that either. With
// holdArmed it loses the next COMMIT on its way too, but as a network cut
// the server does not see: the connection is dead to pgx, while its
// socket stays open to the server (held), whose session waits, in its
// transaction, for a COMMIT that never comes, until releaseHeld closes it.
// asked counts the store's questions about a transaction's outcome
// (pg_xact_status), and onAsk, if set, is called after each.
type answerCutter struct {
	armed, sendArmed, holdArmed atomic.Bool
	cut                         atomic.Int64
	asked                       atomic.Int64
	onAsk                       func(n int64)
	held                        chan net.Conn
}

type cutConn struct {
	net.Conn
	k    *answerCutter
	lose atomic.Bool // set by the tracer: writes from now on are lost
	hold atomic.Bool // set by the tracer: dead to pgx, open to the server
}

func (c *cutConn) Write(p []byte) (int, error) {
	if c.hold.Load() {
		return len(p), nil
	}
	if c.lose.Load() {
		c.Conn.Close()
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Close keeps a held connection's socket open, for releaseHeld.
func (c *cutConn) Close() error {
	if c.hold.Load() {
		c.k.held <- c.Conn
		return nil
	}
	return c.Conn.Close()
}

// releaseHeld closes the sockets the cutter held open: the server sees
// their connections end.
func (k *answerCutter) releaseHeld() {
	for {
		select {
		case c := <-k.held:
			c.Close()
		default:
			return
		}
	}
}

// loseCommit makes c lose the COMMIT it is about to send, as armed.
func (k *answerCutter) loseCommit(c *pgx.Conn) {
	cc := c.PgConn().Conn().(*cutConn)
	switch {
	case k.sendArmed.CompareAndSwap(true, false):
		cc.lose.Store(true)
	case k.holdArmed.CompareAndSwap(true, false):
		cc.hold.Store(true)
		cc.Conn.SetReadDeadline(time.Now()) // a read pgx left waiting ends
	default:
		return
	}
	k.cut.Add(1)
}

type askKey struct{}

func (k *answerCutter) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == "commit" {
		k.loseCommit(c)
	}
	if strings.Contains(d.SQL, "pg_xact_status") {
		return context.WithValue(ctx, askKey{}, true)
	}
	return ctx
}

func (k *answerCutter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(askKey{}) != nil {
		n := k.asked.Add(1)
		if k.onAsk != nil {
			k.onAsk(n)
		}
	}
}

func (k *answerCutter) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	qs := d.Batch.QueuedQueries
	if len(qs) >= 2 && qs[len(qs)-1].SQL == "commit" {
		k.loseCommit(c)
	}
	return ctx
}

func (k *answerCutter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (k *answerCutter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.hold.Load() {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.Conn.Read(p)
	if c.hold.Load() {
		return 0, io.ErrUnexpectedEOF
	}
	if n > 0 && bytes.Contains(p[:n], []byte("COMMIT\x00")) && c.k.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		c.k.cut.Add(1)
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// cutterStore opens a store on clock, with opts, on a pool of its own
// whose COMMIT answers the returned answerCutter cuts, once armed.
func cutterStore(t *testing.T, clock pgstore.Clock, opts ...pgstore.Option) (*pgstore.Store, *answerCutter) {
	t.Helper()
	cfg, k := cutterConfig(t)
	return storeOnPool(t, cfg, clock, opts...), k
}

// cutterConfig is the configuration of cutterStore's pool, for a test
// that changes it, and its cutter.
func cutterConfig(t *testing.T) (*pgxpool.Config, *answerCutter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
	if err != nil {
		t.Fatalf("parse url: %v", err)
	}
	k := &answerCutter{held: make(chan net.Conn, 16)}
	t.Cleanup(k.releaseHeld)
	cfg.ConnConfig.Tracer = k
	var d net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: c, k: k}, nil
	}
	return cfg, k
}

// DESIGN.md §1, I15, and §8: a row's outcome is unknown when "its send may
// have started"; RELIABILITY's "a row not yet sent ... is not sent" rule
// (a context that ended before the send began never turns it unknown).
//
// A claim whose COMMIT ran on the server while its answer was lost (the
// connection cut just then) returned a raw driver error: the dispatcher
// had no claims and sent nothing, but the rows stood Dispatching under its
// worker. Once their lease ended, recovery expired them to OutcomeUnknown
// (turnframe.lease_ended, "the send may have started") — a send that never
// happened, escalated: a remote that can neither deduplicate nor be asked
// hands it to a person, and the message is never sent.
func TestAClaimWhoseCommitAnswerIsLostIsNeverAnUnknownOutcome(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock)
		now := onePayment(t, s)

		var sends atomic.Int64
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sends.Add(1)
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		k.armed.Store(true) // the claim's COMMIT runs, its answer is lost
		report, err := d.RunOnce(ctx, now)
		is.Equal(k.cut.Load(), int64(1)) // the claim's answer was cut
		t.Logf("RunOnce with its claim's answer cut: %+v, %v (sends %d)", report, err, sends.Load())

		// Recovery, once every lease the claim could have given ended.
		later := now.Add(d.Config().Lease() + time.Minute)
		expired, err := s.ExpireClaims(ctx, later)
		is.NoErr(err)
		t.Logf("expired at the lease's end: %v", expired)
		_, err = d.RunOnce(ctx, later)
		is.NoErr(err)

		row := theRow(t, s)
		t.Logf("row: %v, code %q, attempts %d; sends %d", row.Status, row.LastCode, row.Attempts, sends.Load())
		is.True(row.Status != turnframe.OutboxOutcomeUnknown) // never sent, never unknown
		is.Equal(sends.Load(), int64(1))                      // sent, once
		is.Equal(row.Status, turnframe.OutboxCompleted)       // and settled
	})
}

// The other side: a claim whose COMMIT never reached the server (lost on
// its way, the connection closed) rolled back. Its rows must not be taken
// for claimed; and since the store can tell it wrote nothing, the claim is
// ErrBusy, the one error that says so, not a driver error of unknown
// outcome — once its retries are spent (with a retry left it runs again,
// as commitstatus_test's writes do).
func TestAClaimWhoseCommitNeverRanClaimsNothingAndIsBusy(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock, pgstore.WithRetries(0))
		now := onePayment(t, s)

		k.sendArmed.Store(true)
		claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
		is.Equal(k.cut.Load(), int64(1)) // the claim's last round trip was lost
		t.Logf("claim: %d claims, %v", len(claims), err)
		is.Equal(len(claims), 0)                   // nothing handed out
		is.True(errors.Is(err, turnframe.ErrBusy)) // nothing written, try again
		row := theRow(t, s)
		is.Equal(row.Status, turnframe.OutboxPending) // the row was never claimed
		is.Equal(row.Attempts, 0)
		claims, err = s.ClaimDue(ctx, now, 10, "w", time.Minute)
		is.NoErr(err)
		is.Equal(len(claims), 1) // and the next claim takes it
	})
}
