package crashtest_test

import (
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// delivery is one request the remote received for a key.
type delivery struct {
	attempt int    // the row's attempt number (X-Attempt), 0 for a domain call
	worker  string // the dispatcher that sent it (X-Worker)
	status  int    // what the remote answered
	applied bool   // this request applied the effect
	dup     bool   // the effect was already applied: a duplicate delivery
}

// remote is the outside system, living in the parent process so it
// survives every child. It keeps a ledger by idempotency key: an effect is
// applied at most once per key, and every raw delivery is recorded.
type remote struct {
	srv   *httptest.Server
	flaky bool // answer some sends 503, 422 or 500 (see decide)
	seed  uint64

	mu         sync.Mutex
	applied    map[string]int // key → times applied (the ledger; must never exceed 1)
	deliveries map[string][]delivery
}

func newRemote(t *testing.T, seed uint64, flaky bool) *remote {
	r := &remote{seed: seed, flaky: flaky, applied: map[string]int{}, deliveries: map[string][]delivery{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /send", r.send)
	mux.HandleFunc("POST /cmd", r.cmd)
	mux.HandleFunc("GET /applied", r.query)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

// decide draws the remote's answer to a send that has not been applied,
// from the key and attempt, so a run is reproducible from its seed as far
// as the kills allow: 8% 503 (not applied, retry), 4% 422 (not applied,
// permanent), 6% applied but answered 500 (outcome unknown), else applied
// and 200.
func (r *remote) decide(key string, attempt int) (status int, apply bool) {
	if !r.flaky {
		return http.StatusOK, true
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", r.seed, key, attempt)
	switch n := h.Sum64() % 100; {
	case n < 8:
		return http.StatusServiceUnavailable, false
	case n < 12:
		return http.StatusUnprocessableEntity, false
	case n < 18:
		return http.StatusInternalServerError, true
	}
	return http.StatusOK, true
}

func (r *remote) send(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "no key", http.StatusBadRequest)
		return
	}
	attempt, _ := strconv.Atoi(req.Header.Get("X-Attempt"))
	d := delivery{attempt: attempt, worker: req.Header.Get("X-Worker")}
	r.mu.Lock()
	if r.applied[key] > 0 {
		d.dup, d.status = true, http.StatusOK // a replay: answered as the first time, not applied again
	} else {
		var apply bool
		d.status, apply = r.decide(key, attempt)
		if apply {
			r.applied[key]++
			d.applied = true
		}
	}
	r.deliveries[key] = append(r.deliveries[key], d)
	r.mu.Unlock()
	w.Header().Set("X-Request-Id", "ref-"+key)
	w.WriteHeader(d.status)
}

// cmd is a domain call a command handler makes under its own key.
func (r *remote) cmd(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	key := req.Header.Get("Idempotency-Key")
	d := delivery{worker: req.Header.Get("X-Worker"), status: http.StatusOK}
	r.mu.Lock()
	if r.applied[key] > 0 {
		d.dup = true
	} else {
		r.applied[key]++
		d.applied = true
	}
	r.deliveries[key] = append(r.deliveries[key], d)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// query answers whether key was applied: what a reconciler asks.
func (r *remote) query(w http.ResponseWriter, req *http.Request) {
	key := req.URL.Query().Get("key")
	r.mu.Lock()
	n := r.applied[key]
	r.mu.Unlock()
	if n > 0 {
		io.WriteString(w, "yes")
		return
	}
	io.WriteString(w, "no")
}

func (r *remote) snapshot() (map[string]int, map[string][]delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	applied := make(map[string]int, len(r.applied))
	for k, v := range r.applied {
		applied[k] = v
	}
	deliveries := make(map[string][]delivery, len(r.deliveries))
	for k, v := range r.deliveries {
		deliveries[k] = append([]delivery(nil), v...)
	}
	return applied, deliveries
}
