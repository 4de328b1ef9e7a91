package turnframe_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// httpSendTimeout is the send deadline of the tests below that prove an
// answer came in time: the Dispatcher records a row OutcomeUnknown when its
// send answered after it, whatever the answer. It is real time, so it must
// leave room for a loaded machine: at 400 ms (a handshake budget of 200 ms,
// a status line due within about 300 ms) a race-enabled run beside other
// suites now and then answered late, and the body test saw outcome_unknown.
// A sender without its own handshake budget, or one that reads a body that
// never ends, still answers only at the deadline, whatever its length.
const httpSendTimeout = 2 * time.Second

// httpDispatchOne enqueues one row for "payments" in store, runs one sweep of
// a Dispatcher sending through sender with httpSendTimeout, and returns the
// row as the store then holds it.
func httpDispatchOne(t *testing.T, store turnframe.Store, sender turnframe.Sender) turnframe.OutboxRecord {
	t.Helper()
	rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":100}`)})
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.SendTimeout = httpSendTimeout
	report, err := turnframe.NewDispatcher(store, sender, cfg).RunOnce(context.Background(), dispNow)
	if err != nil {
		t.Fatalf("run once: %v", err)
	}
	if report.Claimed() != 1 {
		t.Fatalf("claimed %d rows, want 1", report.Claimed())
	}
	return dispGet(t, store, rows[0].ID)
}

// stallingTLSListener accepts TCP connections on 127.0.0.1 and never answers
// on them, so a TLS handshake never completes. It returns an https URL.
func stallingTLSListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + ln.Addr().String() + "/pay"
}

func TestHTTPSenderSaysNothingLeftBeforeTheDeadlineWhenTLSNeverCompletes(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		sender, err := turnframe.NewHTTPSender(map[string]string{"payments": stallingTLSListener(t)})
		is.NoErr(err) // new sender
		rec := httpDispatchOne(t, store, sender)
		is.Equal(rec.Status, turnframe.OutboxPending) // retried: the answer came before the deadline
		is.Equal(rec.LastCode, "http.tls")            // the handshake ran out of its own budget
	})
}

func TestHTTPSenderCompletesOnTheStatusLineWhenTheBodyNeverEnds(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			w.Header().Set("X-Request-Id", "req-1")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "the start of a body")
			w.(http.Flusher).Flush()
			<-release // and never the end of it
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) }) // runs first: the handler returns, then the server closes
		sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
		is.NoErr(err) // new sender
		rec := httpDispatchOne(t, store, sender)
		is.Equal(rec.Status, turnframe.OutboxCompleted) // completed, in time
		is.Equal(rec.LastCode, "http.200")              // on the status line
		is.Equal(rec.RemoteRef, "req-1")                // with the reference header
	})
}

func TestHTTPSenderOverHTTP2IsUnknownOnceTheRemoteHasTheRequest(t *testing.T) {
	// A body larger than HTTP/2's flow-control windows, of which the
	// handler reads the start and then stalls: the client's timeout comes
	// while the body is still being written, after the remote began to
	// handle the request.
	payload := bytes.Repeat([]byte("x"), 8<<20)
	var handled atomic.Int32
	for i := range 40 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			is := is.New(t)
			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case entered <- struct{}{}:
				default:
				}
				_, _ = io.ReadFull(r.Body, make([]byte, 64<<10))
				<-release
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close) // closed below, and here should the test stop before
			transport := srv.Client().Transport.(*http.Transport)
			transport.ForceAttemptHTTP2 = true
			client := &http.Client{Transport: transport, Timeout: 100 * time.Millisecond}
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL}, turnframe.WithHTTPClient(client))
			is.NoErr(err) // new sender
			entry := dispEntry("acme", "k1")
			entry.Payload = payload
			got := sender.Send(context.Background(), entry)

			// Once the server is closed, every handler that began has
			// returned, and no other will begin.
			close(release)
			transport.CloseIdleConnections()
			srv.Close()
			if len(entered) == 0 {
				return // the request never reached the handler: nothing to prove
			}
			handled.Add(1)
			is.Equal(got.Kind, turnframe.DispatchUnknown) // the remote had it: never retryable
			is.Equal(got.Code, "http.timeout")            // the client's timeout
		})
	}
	if handled.Load() == 0 {
		t.Fatal("no request reached its handler: the test proved nothing")
	}
}
