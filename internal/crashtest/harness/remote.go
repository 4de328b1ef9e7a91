package harness

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// delivery is one request the remote received for a key.
type delivery struct {
	seq       int64  // the remote's order of arrival, over every key
	attempt   int    // the row's attempt number (X-Attempt), 0 for a domain call
	attemptID string // a domain call's attempt id (X-Attempt), "" for a send
	worker    string // the dispatcher or handler that sent it (X-Worker)
	status    int    // what the remote answered
	applied   bool   // this request applied the effect
	dup       bool   // the effect was already applied when it came: a duplicate delivery
	slow      bool   // the remote held its answer back (X-Slow)
}

// span is one handler call, as the handler reported it: it begins when the
// handler starts and ends when it returns.
type span struct {
	worker  string
	attempt string    // the attempt id it runs under
	lease   time.Time // when that attempt's lease on the entry ended, as the handler read it
	begin   time.Time
	end     time.Time // zero while it runs (for ever, for a killed worker)
	local   bool      // a local command's call: no lease, none taken (turnframe.WithLocalCommand)
}

// liveOverlap is a handler call that began under another attempt's lease
// of the same command, as the remote saw it.
type liveOverlap struct {
	key        string // the command's remote key (commandRemoteKey)
	held, by   string // the attempt whose lease was live, the attempt that began
	heldWorker string
	dead       bool // the holder's worker was seen dead when the call began
	line       string
}

// remote is the outside system, living in the parent process so it
// survives every child. It keeps a ledger by idempotency key and records
// every raw delivery. A deduplicating remote applies an effect at most once
// per key and answers a repeat as it answered the first; one that does not
// (dedup false: the "neither" kind) applies every delivery again, so a
// second delivery of an applied key is a second effect. It also
// watches handler calls (spans) so that a command running in two places at
// once is seen, and learns from the parent when a worker died, so that a
// duplicate delivery can be explained.
type remote struct {
	srv   *httptest.Server
	flaky bool // answer some sends 503, 422 or 500 (see decide)
	dedup bool // apply an effect at most once per key
	seed  uint64

	mu         sync.Mutex
	seq        int64
	applied    map[string]int // key → times applied (the ledger; above 1 only when it does not deduplicate)
	deliveries map[string][]delivery
	died       map[string]int64 // worker → the seq at which the parent saw it dead
	spans      map[string][]*span
	slowSends  int
	// Handler calls that began while another attempt's call of the same
	// command was running: under that attempt's live lease (liveOverlaps:
	// the audit asks the entry's history whether that attempt still held
	// it, or had settled it — Execute records an unknown at the handler's
	// deadline, while the handler may still run — and a take of a held
	// command must never happen), or after its lease ended while it still
	// ran (at least once by design).
	liveOverlaps     []liveOverlap
	overlapPastLease int
	lateStarts       int // handler calls that began after their own attempt's lease ended
	// localOverlaps counts local commands' calls that began while another
	// call of the same command ran: allowed (no lease says a local command
	// runs; one commit lands), and counted to show the race was met.
	localOverlaps int
	overlaps      []string
}

func newRemote(t *testing.T, seed uint64, flaky, dedup bool) *remote {
	r := &remote{
		seed: seed, flaky: flaky, dedup: dedup, applied: map[string]int{}, deliveries: map[string][]delivery{},
		died: map[string]int64{}, spans: map[string][]*span{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /send", r.send)
	mux.HandleFunc("POST /cmd", r.cmd)
	mux.HandleFunc("POST /span", r.span)
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
	slow, _ := time.ParseDuration(req.Header.Get("X-Slow"))
	d := delivery{attempt: attempt, worker: req.Header.Get("X-Worker"), slow: slow > 0}
	r.mu.Lock()
	r.seq++
	d.seq = r.seq
	d.dup = r.applied[key] > 0
	if d.dup && r.dedup {
		d.status = http.StatusOK // a replay: answered as the first time, not applied again
	} else {
		var apply bool
		d.status, apply = r.decide(key, attempt)
		if apply {
			r.applied[key]++
			d.applied = true
		}
	}
	r.deliveries[key] = append(r.deliveries[key], d)
	if d.slow {
		r.slowSends++
	}
	r.mu.Unlock()
	if slow > 0 {
		// A slow remote: the effect is applied, the answer takes its time.
		// The fault is the delay itself, not a wait for anything.
		t := time.NewTimer(slow)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
		}
	}
	w.Header().Set("X-Request-Id", "ref-"+key)
	w.WriteHeader(d.status)
}

// cmd is a domain call a command handler makes under its own key, from
// the attempt named by X-Attempt.
func (r *remote) cmd(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	key := req.Header.Get("Idempotency-Key")
	d := delivery{worker: req.Header.Get("X-Worker"), attemptID: req.Header.Get("X-Attempt"), status: http.StatusOK}
	r.mu.Lock()
	r.seq++
	d.seq = r.seq
	d.dup = r.applied[key] > 0
	if !d.dup || !r.dedup {
		r.applied[key]++
		d.applied = true
	}
	r.deliveries[key] = append(r.deliveries[key], d)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// span records a handler call beginning or ending (op=begin|end) for a
// command key, under an attempt (X-Attempt) whose lease ends at X-Lease
// (Unix microseconds; 0 when the handler found its attempt no longer
// holding the entry).
func (r *remote) span(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	q := req.URL.Query()
	key, op := q.Get("key"), q.Get("op")
	worker, attempt := req.Header.Get("X-Worker"), req.Header.Get("X-Attempt")
	leaseUs, _ := strconv.ParseInt(req.Header.Get("X-Lease"), 10, 64)
	local := req.Header.Get("X-Local") == "1"
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case op == "begin" && local:
		for _, s := range r.spans[key] {
			if _, dead := r.died[s.worker]; s.end.IsZero() && s.local && !dead {
				r.localOverlaps++
				break
			}
		}
		r.spans[key] = append(r.spans[key], &span{worker: worker, attempt: attempt, begin: now, local: true})
	case op == "begin":
		lease := time.Time{}
		if leaseUs > 0 {
			lease = time.UnixMicro(leaseUs)
		}
		if !now.Before(lease) {
			r.lateStarts++
			r.overlaps = append(r.overlaps, fmt.Sprintf("%s: attempt %s of %s began at %s, its lease ended at %s",
				key, attempt, worker, now.Format(time.RFC3339Nano), lease.Format(time.RFC3339Nano)))
		}
		for _, s := range r.spans[key] {
			if !s.end.IsZero() || s.attempt == attempt || s.local {
				continue
			}
			_, dead := r.died[s.worker]
			switch {
			case now.Before(s.lease):
				line := fmt.Sprintf("%s: attempt %s of %s began while attempt %s of %s (dead %t) held it until %s",
					key, attempt, worker, s.attempt, s.worker, dead, s.lease.Format(time.RFC3339Nano))
				r.liveOverlaps = append(r.liveOverlaps, liveOverlap{key: key, held: s.attempt, by: attempt, heldWorker: s.worker, dead: dead, line: line})
			case !dead:
				r.overlapPastLease++
				r.overlaps = append(r.overlaps, fmt.Sprintf("%s: attempt %s of %s began while attempt %s of %s still ran, its lease ended at %s",
					key, attempt, worker, s.attempt, s.worker, s.lease.Format(time.RFC3339Nano)))
			}
		}
		r.spans[key] = append(r.spans[key], &span{worker: worker, attempt: attempt, lease: lease, begin: now})
	case op == "end":
		for _, s := range r.spans[key] {
			if s.attempt == attempt && s.worker == worker && s.end.IsZero() {
				s.end = now
			}
		}
	default:
		http.Error(w, "op", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// query answers whether key was applied: what the "asked" kind's Verifier
// asks.
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

// markDead records that worker's process is gone: the parent killed it and
// reaped it. Every delivery after this point that repeats one of its sends
// is explained by its death.
func (r *remote) markDead(worker string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.died[worker] = r.seq
}

// ledgerView is what the audit reads from the remote.
type ledgerView struct {
	applied          map[string]int
	deliveries       map[string][]delivery
	died             map[string]int64
	spans            int
	slowSends        int
	liveOverlaps     []liveOverlap
	overlapPastLease int
	lateStarts       int
	localOverlaps    int
	overlaps         []string
}

func (r *remote) snapshot() ledgerView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := ledgerView{
		applied: make(map[string]int, len(r.applied)), deliveries: make(map[string][]delivery, len(r.deliveries)),
		slowSends: r.slowSends, liveOverlaps: slices.Clone(r.liveOverlaps), overlapPastLease: r.overlapPastLease,
		lateStarts: r.lateStarts, localOverlaps: r.localOverlaps, overlaps: append([]string(nil), r.overlaps...),
		died: maps.Clone(r.died),
	}
	for k, n := range r.applied {
		v.applied[k] = n
	}
	for k, ds := range r.deliveries {
		v.deliveries[k] = append([]delivery(nil), ds...)
	}
	for _, ss := range r.spans {
		v.spans += len(ss)
	}
	return v
}

// diedBefore reports whether worker was seen dead before the delivery
// numbered seq arrived.
func (v ledgerView) diedBefore(worker string, seq int64) bool {
	at, ok := v.died[worker]
	return ok && at < seq
}
