package turnframe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTPSender is a Sender for HTTP remotes that classifies every send
// honestly. It POSTs a row's payload to the URL configured for the row's
// destination, with the header Idempotency-Key carrying entry.RemoteKey()
// (the IETF httpapi draft's header name; the key qualified by the account,
// so a remote several tenants share tells their keys apart, and every resend
// of a row carries the same value: printable ASCII with no white space at
// either end, so no hop trims or rewrites it), and Content-Type
// (WithContentType). An empty payload goes out with Content-Length: 0.
//
// Classification, where "connected" and "written" are read from
// net/http/httptrace (GetConn, GotConn, WroteRequest) and from the sender's
// own dialer, never guessed from an error's text:
//
//	no URL for the destination                      → Permanent "http.no_endpoint"
//	no connection: the name did not resolve, the
//	  dial failed (refused, or out of its budget),
//	  the TLS handshake failed (or ran out of it)   → Retryable "http.dns" | "http.dial" | "http.tls"
//	no connection by the deadline (or the client's
//	  Timeout), or none for another reason (a
//	  proxy refused the CONNECT tunnel)             → Retryable "http.not_connected" | "http.connect"
//	a connection obtained, then no answer, whatever
//	  the error (a deadline, the client's Timeout,
//	  a broken connection)                          → Unknown "http.timeout" | "http.no_response"
//	2xx                                             → Completed "http.200" | …
//	407 (a proxy refused to forward it)             → Retryable "http.proxy_auth"
//	408, 421, 425, 429, 503                         → Retryable "http.408" | "http.421" | … | "http.503"
//	                                                  (429, 503: RetryAfter from Retry-After)
//	409                                             → Unknown "http.409"
//	500, 502, 504                                   → Unknown "http.500" | …
//	any other 4xx                                   → Permanent "http.404" | …
//	anything else (1xx, 3xx, other 5xx)             → Unknown "http.302" | …
//
// Codes are "http." and the status code for every answer but 407. Retryable
// needs proof that not one byte reached the remote: a transport that never
// reported asking for a connection (GetConn), or reported getting one
// (GotConn), gets Unknown for every failure; net/http's Transport reports
// both, and writes nothing before GotConn.
//
// The connection: the default client gives resolving, dialling and the TLS
// handshake together a budget of their own, min(half the time left to ctx's
// deadline, 10 s), so that "nothing left, send again" is answered while the
// send's context is still live; an answer after it counts as Unknown (see
// Sender). A client passed with WithHTTPClient keeps its own timeouts: give
// its dialer and TLS handshake a timeout below DispatchConfig.SendTimeout,
// or a connection still opening at the deadline makes the row Unknown.
//
// The answer: a send is classified on the status line and headers, as soon
// as they arrive. The body is then read (and discarded) at most 64 KiB and
// for at most min(1 s, a quarter of the time left to ctx's deadline), and
// closed: a body that never ends changes nothing, and the answer comes well
// before the deadline.
//
// The verdicts: a 3xx is not followed (following a 301 or 302 would turn the
// POST into a GET elsewhere) and counts as Unknown: the remote answered, but
// not with a verdict on the effect. Four 4xx are not refusals. 408 says the
// server gave up before it had the whole request; 421, that the server
// reached does not serve the URL (an HTTP/2 connection a client shared
// between two hosts); 425, that it would not risk processing a request sent
// in TLS early data. In these three nothing was processed, and the protocol
// lets even a non-idempotent request be sent again (RFC 9110 15.5.9 and
// 15.5.20, RFC 8470 5.2): Retryable. 409 is what a remote that honours
// Idempotency-Key answers while a request under the same key is still in
// progress (the first may yet land: unknown, never a failure). The remote's
// reference (Completed and Unknown) is the response header named by
// WithRemoteRefHeader, "X-Request-Id" by default.
//
// Retry-After is read on a 429 or a 503, and on no other answer: its delay
// becomes Dispatched.RetryAfter, so the dispatcher waits max(its own backoff,
// the delay) before the next send, never more than DispatchConfig.MaxBackoff
// (the backoff cap). The value is delta-seconds ("120") or an HTTP-date (any
// form http.ParseTime reads), counted from the moment the answer's headers
// arrived, on this host's clock: a date already past is a delay of 0. A
// value that is neither (negative, fractional, garbage) is ignored, and one
// too large for a time.Duration is the largest Duration, which the backoff
// cap then bounds. A 429 or 503 without a usable Retry-After waits the
// backoff alone.
//
// Proxies: the default client uses none, whatever HTTP_PROXY, HTTPS_PROXY
// and NO_PROXY say: the payload and its key go to the remote only. An app
// that wants a proxy passes its own client. A proxy's own answer is never
// taken for the remote's verdict where it can be told apart: 407 means the
// proxy forwarded nothing (Retryable), and a refused CONNECT tunnel is no
// connection (Retryable). A proxy's other answers cannot be told from the
// remote's and are classified as the remote's: a proxy that may have
// forwarded a request must not answer it 408, 421, 425, 429 or 503.
//
// The request is never sent twice by net/http on its own. net/http replays a
// request that failed on a reused connection when it can rewind the body
// and the header map holds the key "Idempotency-Key": it takes that header
// as permission. So a payload goes out as a body that cannot be rewound
// (GetBody is nil), an empty payload as no body at all (http.NoBody: the
// only way net/http sends Content-Length: 0 on a POST), and the key under
// the map key "idempotency-key", not the canonical "Idempotency-Key" that
// net/http looks for. Header names are case-insensitive, and HTTP/2 sends
// them in lower case anyway; but a RoundTripper of the app's that reads the
// key must read req.Header["idempotency-key"], as Header.Get canonicalizes
// the name and misses it. One replay is left to net/http, over HTTP/2 only
// (a client passed with WithHTTPClient): a request without a body whose
// stream the server refused (REFUSED_STREAM, or a GOAWAY before it: the
// protocol's own word that it was not processed) or reset with
// PROTOCOL_ERROR is sent again, under the same key.
//
// The default client also opens a fresh connection for every send (no
// keep-alive) and speaks HTTP/1.1 only: a request written on a pooled
// connection the server had just closed cannot be told apart from one the
// server received, and would be recorded Unknown. Pass WithHTTPClient to
// trade that for connection reuse.
//
// An HTTPSender is safe for concurrent use.
type HTTPSender struct {
	endpoints   map[string]string
	client      *http.Client
	contentType string
	refHeader   string
}

var _ Sender = (*HTTPSender)(nil)

// HTTPOption configures NewHTTPSender.
type HTTPOption func(*HTTPSender)

// Defaults of HTTPSender.
const (
	DefaultHTTPContentType     = "application/octet-stream"
	DefaultHTTPRemoteRefHeader = "X-Request-Id"
)

const (
	// httpDrainLimit bounds how much of a response body is read before
	// closing.
	httpDrainLimit = 64 << 10
	// httpBodyBudget bounds how long a response body is read before
	// closing; a quarter of the time left to the deadline, if less.
	httpBodyBudget = time.Second
	// httpKeyHeader is the map key the idempotency key is sent under: not
	// canonical, so net/http does not take the request for one it may
	// replay (see HTTPSender).
	httpKeyHeader = "idempotency-key"
)

// WithHTTPClient sends through a copy of c instead of the default client. The
// copy never follows redirects (its CheckRedirect is replaced), whatever c
// does; its transport, proxy, timeouts and TLS settings are c's, and so is
// the budget for connecting (see HTTPSender). Classification relies on the
// transport reporting GetConn and GotConn to httptrace, as net/http's does.
// A nil c keeps the default.
func WithHTTPClient(c *http.Client) HTTPOption {
	return func(s *HTTPSender) {
		if c != nil {
			cp := *c
			cp.CheckRedirect = noRedirect
			s.client = &cp
		}
	}
}

// WithContentType sets the Content-Type of every request (default
// "application/octet-stream": the payload is opaque to turnframe). An empty
// contentType keeps the default; one that cannot be a header value makes
// NewHTTPSender fail.
func WithContentType(contentType string) HTTPOption {
	return func(s *HTTPSender) {
		if contentType != "" {
			s.contentType = contentType
		}
	}
}

// WithRemoteRefHeader names the response header whose value becomes the
// row's remote reference (default "X-Request-Id"). An empty name keeps the
// default.
func WithRemoteRefHeader(name string) HTTPOption {
	return func(s *HTTPSender) {
		if name != "" {
			s.refHeader = name
		}
	}
}

// NewHTTPSender returns a sender posting each row to endpoints[destination].
// Every URL must be absolute http or https, naming a host and, if it
// names a port, one from 1 to 65535, and the content type a valid
// header value (no control character but tab); otherwise the error is an
// *InvalidError (ErrInvalid) naming the destination or the content type.
// endpoints is copied.
func NewHTTPSender(endpoints map[string]string, opts ...HTTPOption) (*HTTPSender, error) {
	for dest, raw := range endpoints {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("endpoints["+dest+"]", "%q is not an absolute http or https URL", raw)
		}
		// url.Parse takes "http://:80/" and "http://h:99999/": no request
		// could ever reach them, and each row would be retried until its
		// attempts ran out, then failed, for a configuration's error.
		if u.Hostname() == "" {
			return nil, invalid("endpoints["+dest+"]", "%q names no host", raw)
		}
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return nil, invalid("endpoints["+dest+"]", "%q has port %s, not one from 1 to 65535", raw, port)
			}
		}
	}
	s := &HTTPSender{
		endpoints:   maps.Clone(endpoints),
		client:      defaultHTTPClient(),
		contentType: DefaultHTTPContentType,
		refHeader:   DefaultHTTPRemoteRefHeader,
	}
	for _, opt := range opts {
		opt(s)
	}
	if !validHeaderValue(s.contentType) {
		return nil, invalid("content type", "%q cannot be a header value", s.contentType)
	}
	return s, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Send posts entry.Payload to its destination's URL and classifies the
// outcome (see HTTPSender). It honours ctx: connecting ends well before its
// deadline, reading an answer's body too, and at the deadline the request is
// abandoned, Unknown once a connection was obtained.
func (s *HTTPSender) Send(ctx context.Context, entry OutboxEntry) Dispatched {
	target, ok := s.endpoints[entry.Destination]
	if !ok {
		return Dispatched{Kind: DispatchPermanent, Code: "http.no_endpoint"}
	}
	p := &httpProgress{connectBy: connectDeadline(ctx, time.Now())}
	// Ending reqCtx ends the request, and with it a body read that
	// outlives its bound.
	reqCtx, end := context.WithCancel(withHTTPProgress(httptrace.WithClientTrace(ctx, p.trace()), p))
	defer end()
	p.request = reqCtx
	req, err := newHTTPRequest(reqCtx, target, entry.Payload, entry.RemoteKey(), s.contentType)
	if err != nil {
		return Dispatched{Kind: DispatchPermanent, Code: "http.invalid_request"}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return p.classifyFailure(ctx, err)
	}
	arrived := time.Now()
	out := classifyHTTPStatus(resp.StatusCode, resp.Header.Get(s.refHeader))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		out.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), arrived)
	}
	discardBody(resp.Body, bodyBudget(ctx, time.Now()), end)
	return out
}

// newHTTPRequest returns the POST of payload to target under key, such that
// net/http never sends it twice on its own (see HTTPSender).
func newHTTPRequest(ctx context.Context, target string, payload []byte, key, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		// No body: Content-Length: 0. A non-nil empty body would go out
		// chunked, with no length, which strict remotes refuse (411).
		req.Body = http.NoBody
	} else {
		// A body that cannot be rewound.
		req.Body = io.NopCloser(bytes.NewReader(payload))
		req.ContentLength = int64(len(payload))
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", contentType)
	// Not req.Header.Set, which would store it under "Idempotency-Key":
	// net/http (request.go, isReplayable) looks that exact map key up, and
	// with no body (an empty payload) it would then replay the request on
	// a reused connection that broke after it was written (transport.go,
	// shouldRetryRequest). On the wire the name's case does not matter.
	req.Header[httpKeyHeader] = []string{key}
	return req, nil
}

// classifyHTTPStatus classifies an answer by its status code.
func classifyHTTPStatus(status int, ref string) Dispatched {
	code := "http." + strconv.Itoa(status)
	switch {
	case status >= 200 && status < 300:
		return Dispatched{Kind: DispatchCompleted, Code: code, RemoteRef: ref}
	case status == http.StatusProxyAuthRequired:
		// A proxy's own answer: it forwarded nothing.
		return Dispatched{Kind: DispatchRetryable, Code: "http.proxy_auth"}
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable ||
		status == http.StatusMisdirectedRequest || status == http.StatusTooEarly:
		return Dispatched{Kind: DispatchRetryable, Code: code}
	case status == http.StatusConflict || status == http.StatusInternalServerError ||
		status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return Dispatched{Kind: DispatchUnknown, Code: code, RemoteRef: ref}
	case status >= 400 && status < 500:
		return Dispatched{Kind: DispatchPermanent, Code: code}
	default:
		return Dispatched{Kind: DispatchUnknown, Code: code, RemoteRef: ref}
	}
}

// maxDuration is the largest time.Duration.
const maxDuration = time.Duration(math.MaxInt64)

// parseRetryAfter returns the delay a Retry-After value v asks for, counted
// from arrived, the time the answer came: delta-seconds (digits only), or an
// HTTP-date, 0 for a date not after arrived. A value that is neither (empty,
// negative, fractional, garbage) is 0: the backoff alone governs. A delay too
// large for a Duration is maxDuration.
func parseRetryAfter(v string, arrived time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(maxDuration/time.Second) {
			return maxDuration // digits only: the one error is a value out of range
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(at.Sub(arrived), 0) // Sub saturates at maxDuration
}

// bodyBudget returns how long an answer's body may be read, for a send
// under ctx whose answer came at now: httpBodyBudget, or a quarter of the
// time left to ctx's deadline if less.
func bodyBudget(ctx context.Context, now time.Time) time.Duration {
	budget := httpBodyBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, deadline.Sub(now)/4)
	}
	return budget
}

// discardBody reads body, at most httpDrainLimit bytes and for at most
// budget (then it calls abandon, which ends the request and the read), and
// closes it. Reading a short body to its end lets a keep-alive client reuse
// the connection.
func discardBody(body io.ReadCloser, budget time.Duration, abandon context.CancelFunc) {
	timer := time.AfterFunc(budget, abandon)
	defer timer.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, httpDrainLimit))
	_ = body.Close()
}

// classifyFailure classifies a request that got no answer: err is what the
// client returned, ctx the send's context. Once a connection was obtained,
// bytes may have reached the remote and no error proves they did not (an
// HTTP/2 transport may even report the write after it returned): Unknown.
// Retryable needs a transport that asked for a connection and never got one.
func (p *httpProgress) classifyFailure(ctx context.Context, err error) Dispatched {
	timedOut := ctx.Err() != nil || isTimeout(err)
	switch {
	case p.gotConn.Load() || p.wrote.Load():
		if timedOut {
			return Dispatched{Kind: DispatchUnknown, Code: "http.timeout"}
		}
		return Dispatched{Kind: DispatchUnknown, Code: "http.no_response"}
	case !p.askedConn.Load():
		// Nothing reported: nothing proves the request did not leave.
		return Dispatched{Kind: DispatchUnknown, Code: "http.no_response"}
	case p.tlsFailed.Load():
		return Dispatched{Kind: DispatchRetryable, Code: "http.tls"}
	case p.dnsFailed.Load():
		return Dispatched{Kind: DispatchRetryable, Code: "http.dns"}
	case p.dialFailed.Load():
		return Dispatched{Kind: DispatchRetryable, Code: "http.dial"}
	case timedOut:
		return Dispatched{Kind: DispatchRetryable, Code: "http.not_connected"}
	default:
		return Dispatched{Kind: DispatchRetryable, Code: "http.connect"}
	}
}

// isTimeout reports whether err says a timeout ended the request, as the
// client's Timeout does.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// validHeaderValue reports whether v can travel as an HTTP header value
// unchanged: no control character but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}
