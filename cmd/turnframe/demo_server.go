package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"

	"github.com/turnframe/turnframe"
)

// misbehaviour is what the demo's payments server does to the first request
// of one effect, on purpose.
type misbehaviour uint8

const (
	behaveWell misbehaviour = iota
	// refuseConnection: the first send dials a port nobody listens on, so the
	// connection is refused before one byte leaves: retryable.
	refuseConnection
	// answer503: the server answers 503 Service Unavailable once: retryable.
	answer503
	// acceptThenHang: the server records the charge, then never answers
	// before the send timeout: the outcome is unknown, and the row must be
	// reconciled, not sent again.
	acceptThenHang
	// answer400: the server refuses the request once with 400: permanent.
	// The row fails until an operator requeues it.
	answer400
)

var misbehaviourNames = [...]string{"none", "refused connection", "503 once", "accept, then hang", "400 once"}

func (m misbehaviour) String() string { return misbehaviourNames[m] }

// ledgerEntry is what the payments server knows about one idempotency key.
type ledgerEntry struct {
	Charges  int    // charges recorded under the key: the effect landed this many times
	Repeats  int    // requests that came after the charge and were absorbed by the key
	Requests int    // requests that reached the server with this key
	Ref      string // the charge's reference
	Body     string // the charge's request body
}

// paymentsServer is a real HTTP server on 127.0.0.1 that keeps a ledger of
// charges by Idempotency-Key and misbehaves on purpose, once per effect, as
// its script says. It never sleeps: a hanging request waits for the client
// to give up or for the server to shut down.
type paymentsServer struct {
	srv     *httptest.Server
	refused string // host:port of a closed listener: dialling it is refused

	mu      sync.Mutex
	ledger  map[string]*ledgerEntry
	script  map[string]misbehaviour // remote key → the misbehaviour its first request meets
	refuse  map[string]bool         // remote keys whose first send is still to be refused
	charges int
	hang    chan struct{} // closed at shutdown: releases hanging requests
}

// newPaymentsServer starts the server. script maps a remote idempotency key
// to the misbehaviour its first send meets; other keys are served well.
func newPaymentsServer(script map[string]misbehaviour) (*paymentsServer, error) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("reserve a closed port: %w", err)
	}
	refused := closed.Addr().String()
	closed.Close()

	p := &paymentsServer{
		refused: refused,
		ledger:  make(map[string]*ledgerEntry),
		script:  make(map[string]misbehaviour),
		refuse:  make(map[string]bool),
		hang:    make(chan struct{}),
	}
	for key, m := range script {
		if m == refuseConnection {
			p.refuse[key] = true
		} else {
			p.script[key] = m
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", p.charge)
	mux.HandleFunc("GET /charges", p.lookup)
	p.srv = httptest.NewServer(mux)
	return p, nil
}

// URL returns the server's base URL.
func (p *paymentsServer) URL() string { return p.srv.URL }

// Close releases hanging requests and stops the server.
func (p *paymentsServer) Close() {
	close(p.hang)
	p.srv.Close()
}

func (p *paymentsServer) charge(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	e := p.ledger[key]
	if e == nil {
		e = &ledgerEntry{}
		p.ledger[key] = e
	}
	e.Requests++
	m := p.script[key]
	delete(p.script, key) // each misbehaviour happens once
	switch m {
	case answer503:
		p.mu.Unlock()
		http.Error(w, "payments are resting", http.StatusServiceUnavailable)
		return
	case answer400:
		p.mu.Unlock()
		http.Error(w, "card declined", http.StatusBadRequest)
		return
	}
	ref := p.record(e, string(body))
	p.mu.Unlock()
	if m == acceptThenHang {
		// The charge is in the ledger; the answer never comes in time.
		select {
		case <-p.hang:
		case <-r.Context().Done():
		}
		return
	}
	w.Header().Set("X-Request-Id", ref)
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "{\"ref\":%q}\n", ref)
}

// record charges e once; a request for a key already charged is absorbed.
// The caller holds p.mu.
func (p *paymentsServer) record(e *ledgerEntry, body string) string {
	if e.Charges > 0 {
		e.Repeats++
		return e.Ref
	}
	p.charges++
	e.Charges, e.Ref, e.Body = 1, fmt.Sprintf("ch_%03d", p.charges), body
	return e.Ref
}

// lookup answers whether a key was charged: 200 with its reference, or 404.
func (p *paymentsServer) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	p.mu.Lock()
	e := p.ledger[key]
	p.mu.Unlock()
	if e == nil || e.Charges == 0 {
		http.Error(w, "no such charge", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "{\"ref\":%q}\n", e.Ref)
}

// Ledger returns a copy of the ledger and its keys, sorted.
func (p *paymentsServer) Ledger() (map[string]ledgerEntry, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]ledgerEntry, len(p.ledger))
	keys := make([]string, 0, len(p.ledger))
	for k, e := range p.ledger {
		out[k] = *e
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return out, keys
}

// takeRefusal reports whether this send of key must be refused, once.
func (p *paymentsServer) takeRefusal(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse[key] {
		delete(p.refuse, key)
		return true
	}
	return false
}

// sender returns the Sender the demo's dispatchers use: turnframe's
// HTTPSender posting to /charge, except that the first send of a key
// scripted to be refused goes to the closed port, so its connection is
// really refused.
func (p *paymentsServer) sender() (turnframe.Sender, error) {
	good, err := turnframe.NewHTTPSender(map[string]string{"payments": p.srv.URL + "/charge"},
		turnframe.WithContentType("application/json"))
	if err != nil {
		return nil, err
	}
	broken, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://" + p.refused + "/charge"},
		turnframe.WithContentType("application/json"))
	if err != nil {
		return nil, err
	}
	return turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		if p.takeRefusal(e.RemoteKey()) {
			return broken.Send(ctx, e)
		}
		return good.Send(ctx, e)
	}), nil
}

// reconciler asks the server's ledger, over HTTP, whether an unknown row's
// charge landed: found → completed; certainly absent → resend; no clear
// answer → unresolved.
func (p *paymentsServer) reconciler() turnframe.Reconciler {
	client := &http.Client{}
	return turnframe.ReconcilerFunc(func(ctx context.Context, rec turnframe.OutboxRecord) turnframe.Reconciled {
		u := p.srv.URL + "/charges?key=" + url.QueryEscape(rec.RemoteKey())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return turnframe.Reconciled{Verdict: turnframe.VerdictUnresolved}
		}
		resp, err := client.Do(req)
		if err != nil {
			return turnframe.Reconciled{Verdict: turnframe.VerdictUnresolved}
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		switch resp.StatusCode {
		case http.StatusOK:
			return turnframe.Reconciled{Verdict: turnframe.VerdictCompleted}
		case http.StatusNotFound:
			return turnframe.Reconciled{Verdict: turnframe.VerdictResend}
		}
		return turnframe.Reconciled{Verdict: turnframe.VerdictUnresolved}
	})
}

// charged reports whether the ledger holds a charge under key.
func (p *paymentsServer) charged(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.ledger[key]
	return e != nil && e.Charges > 0
}
