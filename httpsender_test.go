package turnframe_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
		{"422 is permanent", status(422), turnframe.DispatchPermanent, "http.422", ""},
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

func TestHTTPSenderRefusesWhatItCannotSend(t *testing.T) {
	tests := []struct {
		name  string
		entry turnframe.OutboxEntry
		code  string
	}{
		{"a destination with no URL", func() turnframe.OutboxEntry { e := dispEntry("acme", "k1"); e.Destination = "email"; return e }(), "http.no_endpoint"},
		{"a key that cannot be a header value", dispEntry("acme", "k\n1"), "http.invalid_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://127.0.0.1:1/"})
			is.NoErr(err)                                                                                                                 // new sender
			is.Equal(sender.Send(context.Background(), tt.entry), turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: tt.code}) // permanent
		})
	}
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

func TestHTTPSenderNeverReplaysOnAReusedConnection(t *testing.T) {
	is := is.New(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if hits.Add(1) == 1 {
			return // the first request succeeds and leaves its connection pooled
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	}))
	defer srv.Close()
	// A client that keeps connections alive: net/http would replay a
	// request carrying an Idempotency-Key on a reused connection that broke,
	// if it could rewind the body.
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL}, turnframe.WithHTTPClient(&http.Client{Transport: &http.Transport{}}))
	is.NoErr(err)                                                                                          // new sender
	is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")).Kind, turnframe.DispatchCompleted) // first
	is.Equal(sender.Send(context.Background(), dispEntry("acme", "k2")).Kind, turnframe.DispatchUnknown)   // second, broken
	is.Equal(hits.Load(), int32(2))                                                                        // sent once each
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
