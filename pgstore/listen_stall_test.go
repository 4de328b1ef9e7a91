package pgstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// stallProxy forwards TCP connections to the server's Unix socket until
// stall is set; from then on it accepts new connections and never answers
// them, as a proxy whose backend went away, or a peer that drops the SYN
// after a failover, does. Connections it forwards already keep working.
type stallProxy struct {
	ln      net.Listener
	network string // of the server's address: "unix" or "tcp"
	addr    string
	stall   atomic.Bool
	stalled chan struct{} // a connection accepted in stall mode
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, network, addr string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &stallProxy{ln: ln, network: network, addr: addr, stalled: make(chan struct{}, 16)}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			if p.stall.Load() {
				p.stalled <- struct{}{}
				continue // accepted, never answered
			}
			s, err := net.Dial(p.network, p.addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// proxied returns a proxy to the test's server and a URL of a fresh schema
// that goes through it. The server may be on a Unix socket (host=/dir, as
// the scripts start it) or on TCP.
func proxied(t *testing.T) (*stallProxy, string) {
	t.Helper()
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	host, port := q.Get("host"), q.Get("port")
	if host == "" {
		host, port = u.Hostname(), u.Port()
	}
	if port == "" {
		port = "5432"
	}
	network, addr := "tcp", net.JoinHostPort(host, port)
	if host == "" || filepath.IsAbs(host) {
		if host == "" {
			host = "/var/run/postgresql" // libpq's default socket directory on Debian
		}
		network, addr = "unix", filepath.Join(host, ".s.PGSQL."+port)
	}
	p := newStallProxy(t, network, addr)
	q.Del("host")
	q.Del("port")
	u.RawQuery, u.Host = q.Encode(), p.ln.Addr().String()
	return p, u.String()
}

// warm has the pool of a open n connections at once, then gives them
// back: they stay open, and keep working once new connections hang. Which
// connections a pool holds when the server stops answering is an accident
// of what ran at the same time before; this test's claim is about the ones
// it holds.
func warm(t *testing.T, a *pgstore.Store, n int) {
	t.Helper()
	conns := make([]interface{ Release() }, 0, n)
	for range n {
		c, err := a.Pool().Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// Run's listener reconnects under Run's own context on Run's loop: when the
// reconnect does not return (the server's address accepts and never
// answers), Run stops dispatching altogether, though its pool's
// connections still work — the notifier of this very store and the poll,
// its documented fallback while it is not listening, are never heard, and
// a row this process enqueued is never sent. DESIGN.md, Run: "A listener
// that fails closes its channel: Run logs a warning, falls back to the
// notifier and the poll, and listens again after a backoff".
func TestRunKeepsDispatchingWhileItsListenerCannotReconnect(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p, through := proxied(t)
	a := mustOpenURL(t, through)
	sent, stop := idleRun(t, a)
	warm(t, a, 3)       // the enqueue, Run's claim and its settlement each find a connection
	p.stall.Store(true) // new connections to the server's address hang from now on
	var killed int
	err := a.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || md5(current_schema()) || '%'`).Scan(&killed)
	is.NoErr(err)       // end the listener's connection, as a server restart would
	is.Equal(killed, 1) // Run's one listener; its reconnect hangs
	await(t, p.stalled, "Run connects again to listen")
	is.NoErr(enqueueRows(ctx, a, turnframe.NewIDGenerator(), "acme", "k1", time.Now(), turnframe.OutboxMessage{Destination: "payments"})) // this process enqueues: its notifier wakes Run
	e := await(t, sent, "the send of a row this process enqueued while its listener reconnects")
	is.Equal(e.Key, turnframe.IdempotencyKey("k1"))
	is.NoErr(stop())
}

// A listen whose connect hangs (the server's address accepts and never
// answers) is a call in progress, which Close waits for; it waited until
// the listen's own context ended, so an application that closes its store
// to stop (Run returns ErrClosed at its next claim) hung there, Run with
// it. Close now ends the connect: the listen returns ErrClosed.
func TestCloseEndsAListenWhoseConnectHangs(t *testing.T) {
	is := is.New(t)
	p, through := proxied(t)
	a := mustOpenURL(t, through)
	p.stall.Store(true) // new connections hang from now on; the pool's keep working
	listened := make(chan error, 1)
	go func() {
		_, stop, err := a.ListenEnqueued(context.Background()) // no deadline of its own
		if err == nil {
			stop()
		}
		listened <- err
	}()
	await(t, p.stalled, "the listen connects")
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	is.NoErr(await(t, closed, "Close returns"))                                       // without waiting for the listen's context
	is.True(errors.Is(await(t, listened, "the listen returns"), turnframe.ErrClosed)) // ended by Close
}
