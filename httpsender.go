package turnframe

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
)

// HTTPSender is a Sender for HTTP remotes that classifies every send
// honestly. It POSTs a row's payload to the URL configured for the row's
// destination, with the header Idempotency-Key carrying entry.RemoteKey()
// (the IETF httpapi draft's header name; the key qualified by the account,
// so a remote several tenants share tells their keys apart, and every resend
// of a row carries the same value), and Content-Type (WithContentType).
//
// Classification, where "written" is read from net/http/httptrace
// (WroteRequest), never guessed from an error's text:
//
//	no URL for the destination                    → Permanent "http.no_endpoint"
//	a key that cannot be a header value (a CTL)   → Permanent "http.invalid_key"
//	not one byte written: DNS, dial (refused), TLS,
//	  or the deadline came before a connection   → Retryable "http.dns" | "http.dial" | "http.tls" | "http.not_connected" | "http.connect"
//	written, then no answer or a broken connection → Unknown "http.no_response"
//	written, then the deadline                    → Unknown "http.timeout"
//	2xx                                           → Completed "http.2xx"
//	408, 429, 503                                 → Retryable "http.408" | "http.429" | "http.503"
//	409                                           → Unknown "http.409"
//	500, 502, 504                                 → Unknown "http.500" | …
//	any other 4xx                                 → Permanent "http.404" | …
//	anything else (101, 3xx, other 5xx)           → Unknown "http.302" | …
//
// Codes are "http." and the status code for every answer. A 3xx is not
// followed (following a 301 or 302 would turn the POST into a GET elsewhere)
// and counts as Unknown: the remote answered, but not with a verdict on the
// effect. Two 4xx are not refusals: 408 says the server gave up before it had
// the whole request (nothing was processed: safe to send again), and 409 is
// what a remote that honours Idempotency-Key answers while a request under
// the same key is still in progress (the first may yet land: unknown, never
// a failure). Retry-After is not read; the dispatcher's backoff governs. The
// remote's reference (Completed and Unknown) is the response header named by
// WithRemoteRefHeader, "X-Request-Id" by default. A response body is read at
// most 64 KiB (and discarded), then closed.
//
// The request is never sent twice by net/http on its own: its body cannot be
// rewound (GetBody is nil), which keeps the transport from replaying it on a
// reused connection even though it carries an Idempotency-Key — net/http
// treats that header as permission to replay. The default client also opens
// a fresh connection for every send (no keep-alive) and speaks HTTP/1.1 only:
// a request written on a pooled connection the server had just closed cannot
// be told apart from one the server received, and would be recorded
// Unknown. Pass WithHTTPClient to trade that for connection reuse.
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

// httpDrainLimit bounds how much of a response body is read before closing.
const httpDrainLimit = 64 << 10

// WithHTTPClient sends through a copy of c instead of the default client. The
// copy never follows redirects (its CheckRedirect is replaced), whatever c
// does; its transport, timeouts and TLS settings are c's. Classification
// relies on the transport calling httptrace's WroteRequest before its
// RoundTrip returns when it wrote anything, as net/http's own does. A nil c
// keeps the default.
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
// contentType keeps the default.
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
// Every URL must be absolute http or https; otherwise the error is an
// *InvalidError (ErrInvalid) naming the destination. endpoints is copied.
func NewHTTPSender(endpoints map[string]string, opts ...HTTPOption) (*HTTPSender, error) {
	for dest, raw := range endpoints {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("endpoints["+dest+"]", "%q is not an absolute http or https URL", raw)
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
	return s, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// defaultHTTPClient is a client of its own (never http.DefaultClient, which
// other code may change): one fresh HTTP/1.1 connection per request, no
// redirects.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no HTTP/2
	return &http.Client{Transport: t, CheckRedirect: noRedirect}
}

// Send posts entry.Payload to its destination's URL and classifies the
// outcome (see HTTPSender). It honours ctx: at its deadline the request is
// abandoned and the outcome is Unknown if anything was written.
func (s *HTTPSender) Send(ctx context.Context, entry OutboxEntry) Dispatched {
	target, ok := s.endpoints[entry.Destination]
	if !ok {
		return Dispatched{Kind: DispatchPermanent, Code: "http.no_endpoint"}
	}
	key := entry.RemoteKey()
	if !validHeaderValue(key) {
		return Dispatched{Kind: DispatchPermanent, Code: "http.invalid_key"}
	}
	tr := new(httpProgress)
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, tr.trace()), http.MethodPost, target, nil)
	if err != nil {
		return Dispatched{Kind: DispatchPermanent, Code: "http.invalid_request"}
	}
	// A body that cannot be rewound: net/http then never replays the
	// request by itself (see HTTPSender).
	req.Body = io.NopCloser(bytes.NewReader(entry.Payload))
	req.ContentLength = int64(len(entry.Payload))
	req.GetBody = nil
	req.Header.Set("Content-Type", s.contentType)
	req.Header.Set("Idempotency-Key", key)

	resp, err := s.client.Do(req)
	if err != nil {
		return tr.classifyFailure(ctx)
	}
	ref := resp.Header.Get(s.refHeader)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, httpDrainLimit))
	_ = resp.Body.Close()
	return classifyHTTPStatus(resp.StatusCode, ref)
}

// classifyHTTPStatus classifies an answer by its status code.
func classifyHTTPStatus(status int, ref string) Dispatched {
	code := "http." + strconv.Itoa(status)
	switch {
	case status >= 200 && status < 300:
		return Dispatched{Kind: DispatchCompleted, Code: code, RemoteRef: ref}
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
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

// httpProgress records, from httptrace callbacks, how far one request got.
// The callbacks may run on the transport's goroutines, hence the atomics.
type httpProgress struct {
	dnsFailed, dialFailed, tlsFailed atomic.Bool
	gotConn, wrote                   atomic.Bool
}

func (p *httpProgress) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
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
		GotConn: func(httptrace.GotConnInfo) { p.gotConn.Store(true) },
		// Called once the transport stopped writing the request, with or
		// without an error: from then on bytes may have reached the remote.
		WroteRequest: func(httptrace.WroteRequestInfo) { p.wrote.Store(true) },
	}
}

// classifyFailure classifies a request that got no answer. net/http's
// transport returns only after its writer is done with the request, so a
// write that started has been reported to WroteRequest by then. A connection
// obtained but no write reported when the deadline came is still counted as
// written, for a transport that returns before its writer finishes.
func (p *httpProgress) classifyFailure(ctx context.Context) Dispatched {
	expired := ctx.Err() != nil
	if p.wrote.Load() || (p.gotConn.Load() && expired) {
		if expired {
			return Dispatched{Kind: DispatchUnknown, Code: "http.timeout"}
		}
		return Dispatched{Kind: DispatchUnknown, Code: "http.no_response"}
	}
	code := "http.connect"
	switch {
	case p.tlsFailed.Load():
		code = "http.tls"
	case p.dnsFailed.Load():
		code = "http.dns"
	case p.dialFailed.Load():
		code = "http.dial"
	case expired:
		code = "http.not_connected"
	}
	return Dispatched{Kind: DispatchRetryable, Code: code}
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
