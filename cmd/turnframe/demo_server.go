package main

import (
	"context"
	"encoding/json"
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

// The demo's three remotes, one per outbox destination, each able to do
// something different about an effect whose outcome is unknown.
const (
	// destPayments is a card processor whose ledger can be looked up by
	// Idempotency-Key (a Verifier asks it), but which charges again on a
	// repeated request.
	destPayments = "payments"
	// destParking is a garage that remembers every Idempotency-Key for a
	// day: a repeated request is answered as the first was, and not booked
	// again (Remote.Deduplicates).
	destParking = "parking"
	// destBakery is a bakery's order form: it cannot be asked, and it
	// bakes again on a repeated request (the zero Remote).
	destBakery = "bakery"
)

// dedupDestinations are the destinations whose server absorbs a repeated
// key instead of acting again.
var dedupDestinations = map[string]bool{destParking: true}

// refPrefixes name each destination's references.
var refPrefixes = map[string]string{destPayments: "ch", destParking: "pk", destBakery: "ord"}

// misbehaviour is what happens to the first send of one effect, on purpose.
type misbehaviour uint8

const (
	behaveWell misbehaviour = iota
	// refuseConnection: the first send dials a port nobody listens on, so the
	// connection is refused before one byte leaves: retryable.
	refuseConnection
	// answer503: the server answers 503 Service Unavailable once: retryable.
	answer503
	// acceptThenHang: the server records the effect, then never answers
	// before the send timeout: the outcome is unknown.
	acceptThenHang
	// answer500AfterBooking: the server records the effect, then answers
	// 500: the outcome is unknown (it may or may not have happened).
	answer500AfterBooking
	// answer500BeforeBooking: the server answers 500 without recording
	// anything: unknown too, as the sender cannot tell it from the above.
	answer500BeforeBooking
	// diesMidSend: the process that claimed the row dies after its request
	// reached the server, before it recorded the answer: the claim's lease
	// ends with the row dispatching.
	diesMidSend
	// diesBeforeSend: the process that claimed the row dies before its
	// request left: the same row, as the file sees it.
	diesBeforeSend
)

var misbehaviourNames = [...]string{"none", "refused connection", "503 once", "accept, then hang",
	"500 after booking", "500 before booking", "died mid-send", "died before sending"}

func (m misbehaviour) String() string { return misbehaviourNames[m] }

// ledgerEntry is what one remote knows about one idempotency key.
type ledgerEntry struct {
	Charges  int    // effects recorded under the key: it landed this many times
	Repeats  int    // requests after the first effect that a deduplicating remote absorbed
	Requests int    // requests that reached the server with this key
	Ref      string // the first effect's reference
}

// remoteServer is a real HTTP server on 127.0.0.1 standing for the
// demo's three remotes (POST /{destination}), each with a ledger by
// Idempotency-Key, that misbehaves on purpose, once per effect, as its
// script says. Only the payments ledger can be looked up over HTTP
// (GET /payments/ledger?key=K). It never sleeps: a hanging request waits
// for the client to give up or for the server to shut down.
type remoteServer struct {
	srv     *httptest.Server
	refused string // host:port of a closed listener: dialling it is refused

	mu      sync.Mutex
	ledgers map[string]map[string]*ledgerEntry // destination → remote key → entry
	script  map[string]misbehaviour            // remote key → the misbehaviour its first request meets
	refuse  map[string]bool                    // remote keys whose first send is still to be refused
	counts  map[string]int                     // destination → effects recorded, for references
	hang    chan struct{}                      // closed at shutdown: releases hanging requests
}

// newRemoteServer starts the server. script maps a remote idempotency key
// to the misbehaviour its first send meets; other keys are served well.
func newRemoteServer(script map[string]misbehaviour) (*remoteServer, error) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("reserve a closed port: %w", err)
	}
	refused := closed.Addr().String()
	closed.Close()

	p := &remoteServer{
		refused: refused,
		ledgers: make(map[string]map[string]*ledgerEntry),
		script:  make(map[string]misbehaviour),
		refuse:  make(map[string]bool),
		counts:  make(map[string]int),
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
	mux.HandleFunc("POST /{dest}", p.accept)
	mux.HandleFunc("GET /payments/ledger", p.lookupPayments)
	p.srv = httptest.NewServer(mux)
	return p, nil
}

// URL returns the server's base URL.
func (p *remoteServer) URL() string { return p.srv.URL }

// Close releases hanging requests and stops the server.
func (p *remoteServer) Close() {
	close(p.hang)
	p.srv.Close()
}

func (p *remoteServer) accept(w http.ResponseWriter, r *http.Request) {
	dest := r.PathValue("dest")
	key := r.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
	if refPrefixes[dest] == "" {
		http.Error(w, "no such remote", http.StatusNotFound)
		return
	}
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	e := p.entry(dest, key)
	e.Requests++
	m := p.script[key]
	delete(p.script, key) // each misbehaviour happens once
	switch m {
	case answer503:
		p.mu.Unlock()
		http.Error(w, "resting", http.StatusServiceUnavailable)
		return
	case answer500BeforeBooking:
		p.mu.Unlock()
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	ref := p.record(dest, e)
	p.mu.Unlock()
	switch m {
	case acceptThenHang:
		// The effect is in the ledger; the answer never comes in time.
		select {
		case <-p.hang:
		case <-r.Context().Done():
		}
		return
	case answer500AfterBooking:
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Request-Id", ref)
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "{\"ref\":%q}\n", ref)
}

// entry returns the ledger entry of key at dest, new if need be. The
// caller holds p.mu.
func (p *remoteServer) entry(dest, key string) *ledgerEntry {
	l := p.ledgers[dest]
	if l == nil {
		l = make(map[string]*ledgerEntry)
		p.ledgers[dest] = l
	}
	e := l[key]
	if e == nil {
		e = &ledgerEntry{}
		l[key] = e
	}
	return e
}

// record carries out one request for e at dest: a deduplicating remote
// absorbs a key it already acted on, the others act again. The caller
// holds p.mu.
func (p *remoteServer) record(dest string, e *ledgerEntry) string {
	if e.Charges > 0 && dedupDestinations[dest] {
		e.Repeats++
		return e.Ref
	}
	p.counts[dest]++
	e.Charges++
	ref := fmt.Sprintf("%s_%03d", refPrefixes[dest], p.counts[dest])
	if e.Ref == "" {
		e.Ref = ref
	}
	return ref
}

// lookupPayments answers whether the payments ledger holds a charge under
// a key: 200 with its reference, or 404.
func (p *remoteServer) lookupPayments(w http.ResponseWriter, r *http.Request) {
	ref, ok := p.lookup(destPayments, r.URL.Query().Get("key"))
	if !ok {
		http.Error(w, "no such charge", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "{\"ref\":%q}\n", ref)
}

// lookup returns the reference of the effect dest recorded under key, if
// any: what the operator learns by phoning the bakery.
func (p *remoteServer) lookup(dest, key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.ledgers[dest][key]
	if e == nil || e.Charges == 0 {
		return "", false
	}
	return e.Ref, true
}

// Ledger returns a copy of dest's ledger and its keys, sorted.
func (p *remoteServer) Ledger(dest string) (map[string]ledgerEntry, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]ledgerEntry, len(p.ledgers[dest]))
	keys := make([]string, 0, len(p.ledgers[dest]))
	for k, e := range p.ledgers[dest] {
		out[k] = *e
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return out, keys
}

// takeRefusal reports whether this send of key must be refused, once.
func (p *remoteServer) takeRefusal(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse[key] {
		delete(p.refuse, key)
		return true
	}
	return false
}

// sender returns the Sender the demo's dispatchers use: turnframe's
// HTTPSender posting to /{destination}, except that the first send of a
// key scripted to be refused goes to the closed port, so its connection is
// really refused.
func (p *remoteServer) sender() (turnframe.Sender, error) {
	good, broken := map[string]string{}, map[string]string{}
	for dest := range refPrefixes {
		good[dest] = p.srv.URL + "/" + dest
		broken[dest] = "http://" + p.refused + "/" + dest
	}
	goodSender, err := turnframe.NewHTTPSender(good, turnframe.WithContentType("application/json"))
	if err != nil {
		return nil, err
	}
	brokenSender, err := turnframe.NewHTTPSender(broken, turnframe.WithContentType("application/json"))
	if err != nil {
		return nil, err
	}
	return turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		if p.takeRefusal(e.RemoteKey()) {
			return brokenSender.Send(ctx, e)
		}
		return goodSender.Send(ctx, e)
	}), nil
}

// paymentsVerifier is the Verifier declared for the payments destination:
// it looks an unknown charge up in the payments ledger, over HTTP, by the
// key the HTTPSender sent. Found: it happened, with the charge's reference;
// certainly absent: it never arrived; any other answer cannot tell.
func (p *remoteServer) paymentsVerifier() turnframe.Verifier {
	client := &http.Client{}
	return turnframe.VerifierFunc(func(ctx context.Context, u turnframe.Uncertain) turnframe.Verification {
		q := p.srv.URL + "/payments/ledger?key=" + url.QueryEscape(u.RemoteKey)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, q, nil)
		if err != nil {
			return turnframe.Verification{Note: err.Error()}
		}
		resp, err := client.Do(req)
		if err != nil {
			return turnframe.Verification{Note: "the ledger did not answer: " + err.Error()}
		}
		defer resp.Body.Close()
		var body struct {
			Ref string `json:"ref"`
		}
		switch resp.StatusCode {
		case http.StatusOK:
			if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body); err != nil {
				return turnframe.Verification{Note: "the ledger's answer is unreadable"}
			}
			return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: body.Ref,
				Note: "the payments ledger holds charge " + body.Ref + " under the key"}
		case http.StatusNotFound:
			return turnframe.Verification{Found: turnframe.FoundNotHappened, Note: "the payments ledger has no charge under the key"}
		}
		return turnframe.Verification{Note: fmt.Sprintf("the ledger answered %d", resp.StatusCode)}
	})
}
