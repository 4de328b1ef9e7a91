package turnframe_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// dispEntry is a row as a sender is handed it.
func dispEntry(account turnframe.AccountID, key turnframe.IdempotencyKey) turnframe.OutboxEntry {
	return turnframe.OutboxEntry{
		ID: turnframe.NewIDGenerator().OutboxID(dispNow), Account: account, Key: key,
		Destination: "payments", Payload: []byte(`{"amount":100}`), Attempts: 1, CreatedAt: dispNow,
	}
}

// dispStatusServer answers every request with status and a reference header.
func dispStatusServer(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "body")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHTTPSenderClassifies(t *testing.T) {
	type setup func(t *testing.T) (url string, ctx context.Context)
	status := func(code int) setup {
		return func(t *testing.T) (string, context.Context) { return dispStatusServer(t, code), context.Background() }
	}
	refused := func(t *testing.T) (string, context.Context) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // nothing listens there any more
		return srv.URL, context.Background()
	}
	hangs := func(t *testing.T) (string, context.Context) {
		arrived, release := make(chan struct{}), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			close(arrived)
			<-release
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) }) // runs first: the handler returns, then the server closes
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			select {
			case <-arrived:
				cancel() // the deadline comes while the server sits on the request
			case <-ctx.Done():
			}
		}()
		return srv.URL, ctx
	}
	hijacks := func(t *testing.T) (string, context.Context) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_ = conn.Close() // it read the whole request, then the connection broke
		}))
		t.Cleanup(srv.Close)
		return srv.URL, context.Background()
	}
	untrusted := func(t *testing.T) (string, context.Context) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		return srv.URL, context.Background()
	}
	redirects := func(t *testing.T) (string, context.Context) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				t.Errorf("the redirect was followed")
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		return srv.URL, context.Background()
	}
	unresolvable := func(*testing.T) (string, context.Context) {
		return "http://turnframe-test.invalid/pay", context.Background()
	}

	tests := []struct {
		name  string
		setup setup
		kind  turnframe.DispatchKind
		code  string
		ref   string
	}{
		{"200 is completed, with the reference header", status(200), turnframe.DispatchCompleted, "http.200", "req-1"},
		{"201 is completed", status(201), turnframe.DispatchCompleted, "http.201", "req-1"},
		{"204 is completed", status(204), turnframe.DispatchCompleted, "http.204", "req-1"},
		{"429 is retryable", status(429), turnframe.DispatchRetryable, "http.429", ""},
		{"503 is retryable", status(503), turnframe.DispatchRetryable, "http.503", ""},
		{"500 is unknown", status(500), turnframe.DispatchUnknown, "http.500", "req-1"},
		{"502 is unknown", status(502), turnframe.DispatchUnknown, "http.502", "req-1"},
		{"504 is unknown", status(504), turnframe.DispatchUnknown, "http.504", "req-1"},
		{"501 is unknown", status(501), turnframe.DispatchUnknown, "http.501", "req-1"},
		{"400 is permanent", status(400), turnframe.DispatchPermanent, "http.400", ""},
		{"404 is permanent", status(404), turnframe.DispatchPermanent, "http.404", ""},
		{"408 is retryable: nothing was processed", status(408), turnframe.DispatchRetryable, "http.408", ""},
		{"409 is unknown: the same key may be in progress", status(409), turnframe.DispatchUnknown, "http.409", "req-1"},
		{"421 is retryable: a server that does not serve the URL processed nothing", status(421), turnframe.DispatchRetryable, "http.421", ""},
		{"425 is retryable: the server would not risk processing it", status(425), turnframe.DispatchRetryable, "http.425", ""},
		{"422 is permanent", status(422), turnframe.DispatchPermanent, "http.422", ""},
		{"407 is retryable: a proxy refused to forward it", status(407), turnframe.DispatchRetryable, "http.proxy_auth", ""},
		{"a redirect is not followed and is unknown", redirects, turnframe.DispatchUnknown, "http.302", ""},
		{"a refused connection is retryable", refused, turnframe.DispatchRetryable, "http.dial", ""},
		{"a failed TLS handshake is retryable", untrusted, turnframe.DispatchRetryable, "http.tls", ""},
		{"an unresolvable host is retryable", unresolvable, turnframe.DispatchRetryable, "http.dns", ""},
		{"a server that hangs past the deadline is unknown", hangs, turnframe.DispatchUnknown, "http.timeout", ""},
		{"a connection broken after the request was read is unknown", hijacks, turnframe.DispatchUnknown, "http.no_response", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			url, ctx := tt.setup(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": url})
			is.NoErr(err) // new sender
			got := sender.Send(ctx, dispEntry("acme", "k1"))
			is.Equal(got, turnframe.Dispatched{Kind: tt.kind, Code: tt.code, RemoteRef: tt.ref}) // classified
		})
	}
}

func TestHTTPSenderPostsThePayloadUnderTheRemoteKey(t *testing.T) {
	is := is.New(t)
	type seen struct {
		method, key, contentType, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(body)}
	}))
	defer srv.Close()
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL + "/charges"}, turnframe.WithContentType("application/json"))
	is.NoErr(err) // new sender
	entry := dispEntry("acme", "k1")
	out := sender.Send(context.Background(), entry)
	is.Equal(out.Kind, turnframe.DispatchCompleted) // completed
	req := <-got
	is.Equal(req.method, http.MethodPost)         // a POST
	is.Equal(req.key, entry.RemoteKey())          // the key qualified by the account
	is.Equal(req.key, "4.acme.k1")                // as documented
	is.Equal(req.contentType, "application/json") // the configured content type
	is.Equal(req.body, `{"amount":100}`)          // the payload
}

func TestHTTPSenderRefusesADestinationWithNoURL(t *testing.T) {
	is := is.New(t)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://127.0.0.1:1/"})
	is.NoErr(err) // new sender
	entry := dispEntry("acme", "k1")
	entry.Destination = "email"
	is.Equal(sender.Send(context.Background(), entry), turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.no_endpoint"}) // permanent
}

func TestHTTPRemoteSeesEveryKeyAsItsRemoteKey(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
	is.NoErr(err) // new sender

	// Keys a store may hold from before the boundary refused white space
	// and control characters at the ends, and keys no longer ASCII.
	entries := []turnframe.OutboxEntry{
		dispEntry("acme", "k1"),
		dispEntry("acme", "k1 "),
		dispEntry("acme", "k1\t"),
		dispEntry("acme", "k\n1"),
		dispEntry("acme", "clé-été"),
		dispEntry("société", "k1"),
	}
	var want []string
	for _, e := range entries {
		is.Equal(sender.Send(context.Background(), e).Kind, turnframe.DispatchCompleted) // sent
		want = append(want, e.RemoteKey())
	}
	mu.Lock()
	defer mu.Unlock()
	is.Equal(keys, want) // each key arrives as its RemoteKey, unchanged
	distinct := map[string]bool{}
	for _, k := range keys {
		distinct[k] = true
	}
	is.Equal(len(distinct), len(entries)) // six rows, six keys at the remote
}

func TestNewHTTPSenderRefusesABadURL(t *testing.T) {
	for _, url := range []string{"", "/relative", "ftp://example.com/", "http://", "://x"} {
		t.Run(url, func(t *testing.T) {
			is := is.New(t)
			_, err := turnframe.NewHTTPSender(map[string]string{"payments": url})
			is.True(errors.Is(err, turnframe.ErrInvalid)) // invalid
		})
	}
}

func TestNewHTTPSenderRefusesAContentTypeThatCannotBeAHeaderValue(t *testing.T) {
	is := is.New(t)
	_, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://127.0.0.1:1/"}, turnframe.WithContentType("text/plain\r\nX-Injected: 1"))
	is.True(errors.Is(err, turnframe.ErrInvalid)) // invalid: net/http would refuse every request
}

func TestHTTPSenderNeverResendsOnAReusedConnection(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"a payload", []byte(`{"amount":100}`)},
		// An empty payload goes out without a body (Content-Length: 0),
		// which net/http replays on a reused connection when the header map
		// holds the key "Idempotency-Key".
		{"an empty payload", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var mu sync.Mutex
			arrivals := map[string]int{}
			var conns []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				key := r.Header.Get("Idempotency-Key")
				mu.Lock()
				arrivals[key]++
				conns = append(conns, r.RemoteAddr)
				first := len(conns) == 1
				mu.Unlock()
				if first {
					return // the first send succeeds and leaves its connection pooled
				}
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				_ = conn.Close() // it read the request, then closed the pooled connection
			}))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}} // keeps connections alive
			defer client.CloseIdleConnections()
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL}, turnframe.WithHTTPClient(client))
			is.NoErr(err) // new sender

			first := dispEntry("acme", "k1")
			is.Equal(sender.Send(context.Background(), first).Kind, turnframe.DispatchCompleted) // first send
			second := dispEntry("acme", "k2")
			second.Payload = tt.payload
			is.Equal(sender.Send(context.Background(), second), turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.no_response"}) // second send: read, no answer

			mu.Lock()
			defer mu.Unlock()
			is.Equal(len(conns), 2)                   // no third arrival
			is.Equal(conns[0], conns[1])              // the second send went out on the first one's connection
			is.Equal(arrivals[second.RemoteKey()], 1) // sent once, never replayed
		})
	}
}

func TestHTTPSenderSendsAnEmptyPayloadWithContentLengthZero(t *testing.T) {
	clients := []struct {
		name string
		opts []turnframe.HTTPOption
	}{
		{"the default client", nil},
		{"a caller's client", []turnframe.HTTPOption{turnframe.WithHTTPClient(&http.Client{})}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			type seen struct {
				length           int64
				transferEncoding []string
				key              string
			}
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				if r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
					w.WriteHeader(http.StatusLengthRequired) // as a strict remote does
				}
				select {
				case got <- seen{r.ContentLength, r.TransferEncoding, r.Header.Get("Idempotency-Key")}:
				default:
					t.Errorf("a second request arrived")
				}
			}))
			defer srv.Close()
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL}, c.opts...)
			is.NoErr(err) // new sender
			entry := dispEntry("acme", "k1")
			entry.Payload = nil
			out := sender.Send(context.Background(), entry)
			var req seen
			select {
			case req = <-got: // sent before the handler answered
			default:
				t.Fatalf("no request arrived: %v", out)
			}
			is.Equal(req.length, int64(0))                                                           // Content-Length: 0
			is.Equal(len(req.transferEncoding), 0)                                                   // not chunked
			is.Equal(req.key, entry.RemoteKey())                                                     // the key, whatever the case of its name on the wire
			is.Equal(out, turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}) // completed
		})
	}
}

func TestHTTPSenderNeverFollowsARedirectOfACallersClient(t *testing.T) {
	is := is.New(t)
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer target.Close()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	}))
	defer remote.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }} // would follow
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": remote.URL}, turnframe.WithHTTPClient(client))
	is.NoErr(err)                                                                                                                                 // new sender
	is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")), turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.302"}) // the remote answered, with no verdict
	is.Equal(reached.Load(), int32(0))                                                                                                            // nothing reached the redirect's target
}

// childProxyTarget names the environment variable that makes
// TestHTTPSenderDefaultClientUsesNoProxyFromTheEnvironment its own child.
const childProxyTarget = "TURNFRAME_TEST_PROXY_CHILD_TARGET"

func TestHTTPSenderDefaultClientUsesNoProxyFromTheEnvironment(t *testing.T) {
	if target := os.Getenv(childProxyTarget); target != "" {
		is := is.New(t)
		sender, err := turnframe.NewHTTPSender(map[string]string{"payments": target})
		is.NoErr(err)                                                                                          // new sender
		is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")).Kind, turnframe.DispatchCompleted) // sent to the remote itself
		return
	}
	is := is.New(t)
	var proxied, arrived atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		arrived.Add(1)
	}))
	defer remote.Close()
	// net/http reads HTTP_PROXY once per process, and never proxies a
	// loopback address. So the send runs in a child process of this test
	// binary, with HTTP_PROXY set from its start, to 0.0.0.0: the local
	// host, as Go dials it, but not a loopback address.
	target := strings.Replace(remote.URL, "127.0.0.1", "0.0.0.0", 1)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=",
		"REQUEST_METHOD=", childProxyTarget+"="+target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("child:\n%s", out)
	}
	is.NoErr(err)                      // the child's send completed
	is.Equal(proxied.Load(), int32(0)) // the proxy saw nothing
	is.Equal(arrived.Load(), int32(1)) // the remote got the request directly
}

func TestHTTPSenderTakesAProxysRefusalForNothingSent(t *testing.T) {
	is := is.New(t)
	var proxied, arrived atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		proxied.Add(1)
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
	}))
	defer proxy.Close()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
	}))
	defer remote.Close()
	proxyURL, err := url.Parse(proxy.URL)
	is.NoErr(err) // proxy URL
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	defer client.CloseIdleConnections()
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": remote.URL}, turnframe.WithHTTPClient(client))
	is.NoErr(err)                                                                                                                                          // new sender
	is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")), turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.proxy_auth"}) // not the remote's verdict: send again
	is.Equal(proxied.Load(), int32(1))                                                                                                                     // the proxy answered
	is.Equal(arrived.Load(), int32(0))                                                                                                                     // the remote saw nothing
}

func TestHTTPRemoteSeesOneKeyPerTenantAndTheSameKeyOnResend(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		var mu sync.Mutex
		var keys []string
		seen := map[string]bool{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, key)
			if !seen[key] {
				seen[key] = true
				w.WriteHeader(http.StatusServiceUnavailable) // busy the first time
			}
		}))
		defer srv.Close()
		acme := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		globex := dispEnqueue(t, store, "globex", "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
		is.NoErr(err) // new sender
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))

		first, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                   // first sweep
		is.Equal(len(first.Retried), 2) // both busy
		second, err := d.RunOnce(ctx, dispNow.Add(time.Second))
		is.NoErr(err)                      // second sweep
		is.Equal(len(second.Completed), 2) // both sent

		mu.Lock()
		defer mu.Unlock()
		is.Equal(len(keys), 4)                                                                                                           // four requests
		is.True(keys[0] != keys[1])                                                                                                      // two tenants, two keys
		is.Equal(map[string]bool{keys[0]: true, keys[1]: true}, map[string]bool{acme[0].RemoteKey(): true, globex[0].RemoteKey(): true}) // the rows' remote keys
		is.Equal(map[string]bool{keys[2]: true, keys[3]: true}, map[string]bool{keys[0]: true, keys[1]: true})                           // each resend carries its first key
	})
}
