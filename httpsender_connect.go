package turnframe

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// The default client's connections, and what a send learns of its own. A
// send answers "nothing left, send again" for a connection that never opened
// only if it answers before its deadline (see Sender), so the default client
// gives resolving, dialling and the TLS handshake a budget of their own, below
// the send's deadline.

// httpConnectBudget caps the time the default client gives resolving,
// dialling and the TLS handshake together.
const httpConnectBudget = 10 * time.Second

// defaultHTTPClient is a client of its own (never http.DefaultClient nor
// http.DefaultTransport, which other code may change): no proxy, whatever
// the environment says; one fresh HTTP/1.1 connection per request, opened
// within the connect deadline of the send that asked; no redirects.
func defaultHTTPClient() *http.Client {
	d := &httpDialer{dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	t := &http.Transport{
		Proxy:             nil,
		DialContext:       d.dial,
		DialTLSContext:    d.dialTLS,
		DisableKeepAlives: true,
		// A non-nil empty map: no HTTP/2.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	return &http.Client{Transport: t, CheckRedirect: noRedirect}
}

// connectDeadline returns when connecting must have ended for a send under
// ctx that starts at now: min(half the time left to ctx's deadline,
// httpConnectBudget) from now.
func connectDeadline(ctx context.Context, now time.Time) time.Time {
	budget := httpConnectBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, deadline.Sub(now)/2)
	}
	return now.Add(budget)
}

// httpProgress is how far one send got: recorded by httptrace callbacks and
// by the default client's dialer, which may run on the transport's
// goroutines (hence the atomics), and which find it in the request's
// context (withHTTPProgress).
type httpProgress struct {
	connectBy                        time.Time       // the connect deadline; set before the send, then read only
	request                          context.Context // the send's request: ends when Send returns; set before the send
	askedConn, gotConn, wrote        atomic.Bool
	dnsFailed, dialFailed, tlsFailed atomic.Bool
}

func (p *httpProgress) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) { p.askedConn.Store(true) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			if i.Err != nil {
				p.dnsFailed.Store(true)
			}
		},
		ConnectDone: func(_, _ string, err error) {
			if err != nil {
				p.dialFailed.Store(true)
			}
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				p.tlsFailed.Store(true)
			}
		},
		// From here on bytes may reach the remote: net/http writes nothing
		// on a connection before reporting it, over HTTP/1 and HTTP/2.
		GotConn: func(httptrace.GotConnInfo) { p.gotConn.Store(true) },
		// Called once the transport stopped writing the request, with or
		// without an error.
		WroteRequest: func(httptrace.WroteRequestInfo) { p.wrote.Store(true) },
	}
}

type httpProgressKey struct{}

// withHTTPProgress returns ctx carrying p. net/http dials under a context
// detached from the request's cancellation (and deadline) but with its
// values: the dialer finds the send's connect deadline there.
func withHTTPProgress(ctx context.Context, p *httpProgress) context.Context {
	return context.WithValue(ctx, httpProgressKey{}, p)
}

// httpDialer opens the default client's connections, each within the
// connect deadline of the send that asked for it.
type httpDialer struct {
	dialer net.Dialer
}

// bound returns ctx ending at the connect deadline of the send ctx belongs
// to (httpConnectBudget from now for a dial no send asked for), and that
// send's progress, nil for none.
func (d *httpDialer) bound(ctx context.Context) (context.Context, context.CancelFunc, *httpProgress) {
	p, _ := ctx.Value(httpProgressKey{}).(*httpProgress)
	by := time.Now().Add(httpConnectBudget)
	if p != nil {
		by = p.connectBy
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	if p != nil && p.request != nil {
		// net/http detached the dial from the request's cancellation: end
		// it with the send, so nothing of a send outlives it.
		stop := context.AfterFunc(p.request, cancel)
		return ctx, func() { stop(); cancel() }, p
	}
	return ctx, cancel, p
}

// dial opens a TCP connection within the connect deadline.
func (d *httpDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel, p := d.bound(ctx)
	defer cancel()
	return d.tcp(ctx, p, network, addr)
}

// dialTLS opens a TCP connection and completes its TLS handshake, both
// within the connect deadline. net/http's own handshake would run under
// TLSHandshakeTimeout, a fixed duration, whatever the send's deadline.
func (d *httpDialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel, p := d.bound(ctx)
	defer cancel()
	raw, err := d.tcp(ctx, p, network, addr)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	conn := tls.Client(raw, &tls.Config{ServerName: host})
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		if p != nil {
			p.tlsFailed.Store(true)
		}
		return nil, err
	}
	return conn, nil
}

// tcp dials addr under ctx and records a failure in p: the dialer reports
// most failures to httptrace itself, but not one that comes before it
// tried an address (a deadline already past).
func (d *httpDialer) tcp(ctx context.Context, p *httpProgress, network, addr string) (net.Conn, error) {
	conn, err := d.dialer.DialContext(ctx, network, addr)
	if err != nil && p != nil {
		p.dialFailed.Store(true)
	}
	return conn, err
}
