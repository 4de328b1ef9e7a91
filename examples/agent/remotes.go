package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"

	"github.com/turnframe/turnframe"
)

// The example's three remotes, each declared to turnframe for what it can
// do about an effect whose outcome is unknown (see remoteOptions).
const (
	// remoteAirline books a seat; it remembers every Idempotency-Key and
	// answers a repeated request as the first, without booking again.
	remoteAirline = "airline"
	// remotePayments charges a card; its ledger can be looked up by key,
	// and a repeated request charges again.
	remotePayments = "payments"
	// remoteMail sends an email; what it sent can be looked up by key, a
	// repeated request sends again, and its first request hangs after the
	// email left, until the caller gives up.
	remoteMail = "mail"
)

// refPrefix names each remote's references.
var refPrefix = map[string]string{remoteAirline: "AIR", remotePayments: "PAY", remoteMail: "MAIL"}

// effect is what one remote knows about one Idempotency-Key.
type effect struct {
	Requests int    // requests that reached it under the key
	Effects  int    // times it acted: 1 is exactly once
	Ref      string // its reference for the first effect
}

// remotes is a real HTTP server on 127.0.0.1 playing the three remotes
// (POST /{remote}, GET /{remote}/lookup?key=K), with a ledger per remote
// by Idempotency-Key. It never sleeps: the hanging request waits for its
// client to give up. Safe for concurrent use.
type remotes struct {
	srv *httptest.Server

	mu      sync.Mutex
	ledgers map[string]map[string]*effect // remote → key → effect
	hangs   int                           // mail requests still to hang
	changed chan struct{}                 // closed and replaced at every change
}

func newRemotes() *remotes {
	r := &remotes{ledgers: make(map[string]map[string]*effect), hangs: 1, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{remote}", r.act)
	mux.HandleFunc("GET /{remote}/lookup", r.lookup)
	r.srv = httptest.NewServer(mux)
	return r
}

// Close stops the server.
func (r *remotes) Close() { r.srv.Close() }

func (r *remotes) act(w http.ResponseWriter, req *http.Request) {
	name, key := req.PathValue("remote"), req.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 64<<10))
	if refPrefix[name] == "" || key == "" {
		http.Error(w, "unknown remote or no Idempotency-Key", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	e := r.entry(name, key)
	e.Requests++
	if e.Effects == 0 || name != remoteAirline { // only the airline deduplicates
		e.Effects++
		if e.Ref == "" {
			e.Ref = fmt.Sprintf("%s-%03d", refPrefix[name], len(r.ledgers[name]))
		}
	}
	ref := e.Ref
	hang := name == remoteMail && r.hangs > 0
	if hang {
		r.hangs--
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if hang {
		<-req.Context().Done() // the email left; the answer never comes
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"ref\":%q}\n", ref)
}

// entry returns name's ledger entry for key, new if need be. The caller
// holds r.mu.
func (r *remotes) entry(name, key string) *effect {
	l := r.ledgers[name]
	if l == nil {
		l = make(map[string]*effect)
		r.ledgers[name] = l
	}
	if l[key] == nil {
		l[key] = &effect{}
	}
	return l[key]
}

func (r *remotes) lookup(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	e := r.ledgers[req.PathValue("remote")][req.URL.Query().Get("key")]
	var ref string
	if e != nil && e.Effects > 0 {
		ref = e.Ref
	}
	r.mu.Unlock()
	if ref == "" {
		http.Error(w, "no such effect", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "{\"ref\":%q}\n", ref)
}

// waitFor blocks until name's ledger holds an effect under key, or ctx
// ends.
func (r *remotes) waitFor(ctx context.Context, name, key string) error {
	for {
		r.mu.Lock()
		e, changed := r.ledgers[name][key], r.changed
		r.mu.Unlock()
		if e != nil && e.Effects > 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to act on %s: %w", name, key, ctx.Err())
		}
	}
}

// ledger returns a copy of name's ledger and its keys, sorted.
func (r *remotes) ledger(name string) (map[string]effect, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]effect, len(r.ledgers[name]))
	keys := make([]string, 0, len(r.ledgers[name]))
	for k, e := range r.ledgers[name] {
		out[k] = *e
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return out, keys
}

// sender is the Sender of the outbox rows: turnframe's HTTPSender, posting
// each row to its remote with the row's RemoteKey as Idempotency-Key.
func (r *remotes) sender() (turnframe.Sender, error) {
	return turnframe.NewHTTPSender(map[string]string{
		remoteAirline:  r.srv.URL + "/" + remoteAirline,
		remotePayments: r.srv.URL + "/" + remotePayments,
	}, turnframe.WithContentType("application/json"))
}

// post sends body to name under key itself, as the send_email tool does:
// it returns the remote's reference, or an error if no answer came.
func (r *remotes) post(ctx context.Context, name, key string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/"+name, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s", name, resp.Status)
	}
	return readRef(resp.Body)
}

// verifier looks an effect up in name's ledger by the key it was sent
// under: keyOf turns what turnframe knows into that key.
func (r *remotes) verifier(name string, keyOf func(turnframe.Uncertain) string) turnframe.Verifier {
	return turnframe.VerifierFunc(func(ctx context.Context, u turnframe.Uncertain) turnframe.Verification {
		q := r.srv.URL + "/" + name + "/lookup?key=" + url.QueryEscape(keyOf(u))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, q, nil)
		if err != nil {
			return turnframe.Verification{Note: err.Error()}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return turnframe.Verification{Note: name + " did not answer the lookup"}
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ref, err := readRef(resp.Body)
			if err != nil {
				return turnframe.Verification{Note: err.Error()}
			}
			return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: ref, Note: name + " holds " + ref + " under the key"}
		case http.StatusNotFound:
			return turnframe.Verification{Found: turnframe.FoundNotHappened, Note: name + " holds nothing under the key"}
		}
		return turnframe.Verification{Note: fmt.Sprintf("%s answered %d", name, resp.StatusCode)}
	})
}

func readRef(body io.Reader) (string, error) {
	var v struct {
		Ref string `json:"ref"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 4096)).Decode(&v); err != nil || v.Ref == "" {
		return "", fmt.Errorf("an unreadable answer")
	}
	return v.Ref, nil
}
