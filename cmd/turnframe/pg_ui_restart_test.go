package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// pgProxy stands between a --db URL and the test server, byte for byte,
// so that a test can take the server away (a restart: every connection
// cut, no new one accepted) and bring it back.
type pgProxy struct {
	t                *testing.T
	network, listen  string // where the proxy listens
	toNet, toAddress string // the server

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

// newPGProxy starts a proxy to the server rawURL names and returns it with
// rawURL led through it; both end with t.
func newPGProxy(t *testing.T, rawURL string) (*pgProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{t: t, network: "tcp", listen: "127.0.0.1:0", toNet: "tcp", toAddress: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	if strings.HasPrefix(cfg.Host, "/") { // the server's Unix socket: peer authentication sees this process
		dir, err := os.MkdirTemp("", "pgproxy") // short: a socket's path is at most about 100 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		name := fmt.Sprintf(".s.PGSQL.%d", cfg.Port)
		p.network, p.listen = "unix", filepath.Join(dir, name)
		p.toNet, p.toAddress = "unix", filepath.Join(cfg.Host, name)
	}
	p.up()
	t.Cleanup(p.down)
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if p.network == "unix" {
		q.Set("host", filepath.Dir(p.listen))
	} else {
		host, port, _ := net.SplitHostPort(p.ln.Addr().String())
		q.Set("host", host)
		q.Set("port", port)
	}
	u.RawQuery = q.Encode()
	return p, u.String()
}

// up accepts connections again, on the same address.
func (p *pgProxy) up() {
	p.t.Helper()
	ln, err := net.Listen(p.network, p.listen)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.listen = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.pipe(c)
		}
	}()
}

// pipe joins c to a new connection to the server.
func (p *pgProxy) pipe(c net.Conn) {
	s, err := net.Dial(p.toNet, p.toAddress)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	p.wg.Add(2)
	go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
	go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
}

// down cuts every connection and stops listening, as a server that
// restarts does, and returns once the proxy's goroutines have ended.
func (p *pgProxy) down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// The page on PostgreSQL while the server restarts. Its pooled connections
// were ended by the server (FATAL 57P01, as a restart or a failover ends
// them), then no connection could be opened, then the server was back. A
// read or a write on a dropped connection is nothing wrong with the
// request: the page must say "try again" (503), "Nothing changed" for a
// write, and serve again once the server is back. It answered 500, "could
// not be done", and logged a fault to look into: pgstore returned the
// driver's error bare for a read, and the page's look at the schema
// version before every request is one.
func TestPGThePageAnswersAServerRestartTryAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	f := mustPGFixture(t)
	proxy, through := newPGProxy(t, f.path)
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	db := &dbFlags{path: through, busy: time.Second}
	store, err := db.open(ctx, e)
	is.NoErr(err)
	defer store.Close()
	s, err := newUIServer(store, db, e, uiOptions{loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	u := &testUI{t: t, srv: srv, ui: s}
	code, _ := u.get("/")
	is.Equal(code, http.StatusOK) // served

	// The server ends the page's sessions (a fast shutdown, a failover).
	killer, err := pgx.Connect(ctx, f.path)
	is.NoErr(err)
	defer killer.Close(ctx)
	var pids []int32
	for _, c := range store.(*pgOps).Pool().AcquireAllIdle(ctx) {
		pids = append(pids, int32(c.Conn().PgConn().PID()))
		c.Release()
	}
	is.True(len(pids) > 0) // the page holds a connection
	_, err = killer.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids)
	is.NoErr(err)
	waitGone(t, killer, pids)
	code, body := u.get("/")
	t.Logf("a page on a connection the server ended: %d %s", code, body)
	is.Equal(code, http.StatusServiceUnavailable) // try again: the request was fine
	is.True(strings.Contains(body, "Try again"))

	// Down: no connection can be opened.
	proxy.down()
	code, body = u.get("/")
	t.Logf("a page while the server is down: %d %s", code, body)
	is.Equal(code, http.StatusServiceUnavailable) // a read
	is.True(strings.Contains(body, "Try again"))
	form := settleForm(s.token, f.unknown, "completed", "")
	form.Set("attempt", "1")
	code, body = u.post("/settle", form, nil)
	t.Logf("a settle while the server is down: %d %s", code, body)
	is.Equal(code, http.StatusServiceUnavailable)      // a write
	is.True(strings.Contains(body, "Nothing changed")) // and says so

	proxy.up()
	code, _ = u.get("/")
	is.Equal(code, http.StatusOK) // back with the server
}

// waitGone returns once the server has let the backends pids go.
func waitGone(t *testing.T, c *pgx.Conn, pids []int32) {
	t.Helper()
	for { // poll the server, never sleep
		var n int
		err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&n)
		if err != nil {
			t.Fatal(errors.Join(errors.New("wait for the backends to go"), err))
		}
		if n == 0 {
			return
		}
	}
}
