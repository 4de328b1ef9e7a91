package crashtest_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// crashKills is how many children TestCrashRecovery kills: 30 by default
// (and in -short), TURNFRAME_CRASH_KILLS for the long run.
func crashKills(t *testing.T) int {
	if v := os.Getenv("TURNFRAME_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TURNFRAME_CRASH_KILLS=%q: want a positive number", v)
		}
		return n
	}
	return 30
}

// crashSeed is TURNFRAME_CRASH_SEED, or a seed from the clock; the test
// prints it either way.
func crashSeed(t *testing.T) uint64 {
	if v := os.Getenv("TURNFRAME_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TURNFRAME_CRASH_SEED=%q: %v", v, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// TestCrashRecovery runs a real workload in two child processes at once on
// one file database, with the fault points of faults_test.go firing and a
// third process releasing ended leases all along. After a random number of
// progress lines it kills one child, or both, with SIGKILL, and starts new
// ones: a new child recovers beside a live one, or two recover at once.
// Two last children drain everything at once, until nothing is unfinished
// and every lease has ended (bounded by drainDeadline). Then nothing may be
// lost, doubled, run in two places at once, or left unfinished.
//
// Every random draw — kill points in progress lines, victims, command
// kinds, fault points, the remote's answers — comes from the seed, which
// the test prints first; TURNFRAME_CRASH_SEED replays it. Kill points are
// counted in lines, so where a kill lands still depends on timing.
func TestCrashRecovery(t *testing.T) {
	kills, seed := crashKills(t), crashSeed(t)
	t.Logf("seed %d, %d kills (replay the draws with TURNFRAME_CRASH_SEED=%d; kill points still depend on timing)", seed, kills, seed)
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 1))
	rem := newRemote(t, seed, true)
	db := filepath.Join(t.TempDir(), "crash.db")
	createFile(t, db) // two children start at once: neither should meet a half-migrated file
	h := newHarness(t, seed, rem, envDB+"="+db, envRemote+"="+rem.srv.URL, envSeed+"="+strconv.FormatUint(seed, 10), envFaults+"=1")

	releaser := h.start("releaser", true)
	live := [2]*proc{h.start("work", false), h.start("work", false)}
	h.together++
	for h.kills < kills {
		n, victims := 1+rng.IntN(120), rng.IntN(3)  // lines of the two children together
		if p := h.waitProgress(live, n); p != nil { // a fault line asked for a kill right away
			i := slices.Index(live[:], p)
			h.kill(p)
			live[i] = h.start("work", false)
			h.beside++
			continue
		}
		switch victims {
		case 2: // both die: two recover at once
			h.kill(live[0])
			h.kill(live[1])
			live = [2]*proc{h.start("work", false), h.start("work", false)}
			h.together++
		default: // one dies: its successor recovers beside a live one
			h.kill(live[victims])
			live[victims] = h.start("work", false)
			h.beside++
		}
	}
	h.kill(live[0])
	h.kill(live[1])
	drains := [2]*proc{h.start("drain", false), h.start("drain", false)}
	h.together++
	for _, p := range drains {
		if err := p.finish(); err != nil {
			t.Fatalf("seed %d: %s: %v\nstderr:\n%s", seed, p.name, err, p.stderr.String())
		}
		h.tallyErrors(p)
	}
	if err := releaser.finish(); err != nil {
		t.Fatalf("seed %d: releaser: %v\nstderr:\n%s", seed, err, releaser.stderr.String())
	}
	h.tallyErrors(releaser)
	f := audit(t, db, rem, h)
	t.Logf("crash run, seed %d, %v:\n%s", seed, time.Since(began).Round(time.Second), f)
	f.assert(t)
}

// createFile creates and migrates the database file.
func createFile(t *testing.T, db string) {
	t.Helper()
	store, err := sqlitestore.Open(context.Background(), db)
	if err != nil {
		t.Fatalf("create %s: %v", db, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// busyRow is a row whose settlement met a held file (fault b) after a send
// whose outcome the dispatcher knew.
type busyRow struct {
	key     string // its RemoteKey
	attempt int
}

// harness is the parent's side of a crash run: it starts and kills the
// children, and reads what they report.
type harness struct {
	t       *testing.T
	seed    uint64
	rem     *remote
	env     []string
	notify  chan struct{} // poked on every progress line of every child
	killNow chan *proc    // a working child that just reported a fault in killAfter, drawn for a kill
	inc     int           // the next child's incarnation

	kills, lines, together, beside int // (parent goroutine only)

	mu           sync.Mutex
	dead         map[string]bool // workers killed and reaped
	counts       map[string]int  // fault points and other events the children reported
	killsAfter   map[string]int  // kills that came right after a fault line
	busyRows     []busyRow
	released     int            // rows released, by anyone
	liveReleases []string       // rows released from a worker that was not dead
	errorLogs    map[string]int // messages the children logged at error level
}

func newHarness(t *testing.T, seed uint64, rem *remote, env ...string) *harness {
	return &harness{
		t: t, seed: seed, rem: rem, env: env, notify: make(chan struct{}, 1), killNow: make(chan *proc, 8),
		dead: map[string]bool{}, counts: map[string]int{}, killsAfter: map[string]int{}, errorLogs: map[string]int{},
	}
}

// start starts a child in role, named by its worker id.
func (h *harness) start(role string, stdin bool) *proc {
	inc := h.inc
	h.inc++
	return start(h.t, spec{
		role: role, name: workerName(role, inc), env: append(slices.Clone(h.env), envInc+"="+strconv.Itoa(inc)),
		stdin: stdin, notify: h.notify, onLine: h.observe,
	})
}

// observe reads one line of a child (on its reader goroutine).
func (h *harness) observe(p *proc, line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch f[0] {
	case "P": // P fault NAME …, P seen NAME …
		if len(f) < 3 || (f[1] != "fault" && f[1] != "seen") {
			return
		}
		h.counts[f[2]]++
		if f[1] == "fault" && strings.HasPrefix(p.name, "work-") && draw(h.seed, "kill", line) < killAfter[f[2]] {
			select {
			case h.killNow <- p:
			default:
			}
		}
		if f[2] == "busy_lock" && len(f) >= 6 && f[5] == "true" { // P fault busy_lock KEY ATTEMPT KNOWN …
			attempt, _ := strconv.Atoi(f[4])
			h.busyRows = append(h.busyRows, busyRow{key: f[3], attempt: attempt})
		}
	case "F": // F NAME N
		n := 1
		if len(f) >= 3 {
			n, _ = strconv.Atoi(f[2])
		}
		h.counts[f[1]] += n
	case "R": // R ROW WORKER RELEASER: a row released from WORKER's claim
		h.released++
		if len(f) < 3 || !h.dead[f[2]] {
			h.liveReleases = append(h.liveReleases, line)
		}
	}
}

// waitProgress blocks until the live children made n progress lines
// between them, or one of them reported a fault drawn for a kill right
// away: then it returns that child. A child that exits by itself fails the
// test.
func (h *harness) waitProgress(live [2]*proc, n int) *proc {
	total := func() int {
		a, _ := live[0].lines()
		b, _ := live[1].lines()
		return a + b
	}
	from := total()
	for total()-from < n {
		for _, p := range live {
			if p.exited() {
				h.failExited(p)
			}
		}
		select {
		case p := <-h.killNow:
			if p == live[0] || p == live[1] { // not one killed already
				return p
			}
		case <-h.notify:
		case <-live[0].done:
		case <-live[1].done:
		}
	}
	return nil
}

func (h *harness) failExited(p *proc) {
	err := p.cmd.Wait()
	p.reaped = true
	h.t.Fatalf("%s exited by itself: %v\nstderr:\n%s", p.name, err, p.stderr.String())
}

// kill kills a live child and records it dead, here and at the remote.
func (h *harness) kill(p *proc) {
	exited, err := p.kill()
	if exited {
		h.t.Fatalf("%s exited by itself before its kill: %v\nstderr:\n%s", p.name, err, p.stderr.String())
	}
	n, last := p.lines()
	h.kills++
	h.lines += n
	h.tallyErrors(p)
	h.mu.Lock()
	h.dead[p.name] = true
	if f := strings.Fields(last); len(f) >= 3 && f[1] == "fault" {
		h.killsAfter[f[2]]++
	}
	h.mu.Unlock()
	h.rem.markDead(p.name)
}

// tallyErrors counts the messages a reaped child logged at error level.
func (h *harness) tallyErrors(p *proc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		_, rest, ok := strings.Cut(line, " ERROR ")
		if !ok {
			continue
		}
		var msg []string
		for _, w := range strings.Fields(rest) {
			if strings.Contains(w, "=") {
				break
			}
			msg = append(msg, w)
		}
		h.errorLogs[strings.Join(msg, " ")]++
	}
}

// figures are what an audit measured.
type figures struct {
	kills, lines, together, beside             int
	turns, abandoned, unfinished, notDelivered int
	committed, rejected, unsettled             int
	hidden, hiddenApplied                      int
	rows, completed, failed, open              int
	lost, extraRows, committedTwice            int
	appliedTwice, failedButApplied             int
	overDelivered                              int
	duplicates, explained                      int
	busyRows, busySentAgain, busyResentDead    int
	commandRepeats, commandMismatch            int
	reconciledCompleted, reconciledNotReceived int
	spans, overlapLive, overlapPastLease       int
	lateStarts, slowSends                      int
	released, liveReleases                     int
	counts, killsAfter, errorLogs              map[string]int
	integrity                                  string
}

func (f figures) String() string {
	c := func(name string) int { return f.counts[name] }
	return fmt.Sprintf(`  kills survived:                 %d SIGKILLs (progress lines seen: %d)
  two processes recovering at once: %d times two children started together (drain included), %d times one started beside a live one
  turns:                          %d (not delivered: %d, abandoned by fault (a): %d, unfinished for recovery: %d)
  commands:                       committed %d, rejected %d, unsettled %d (of which executing on an abandoned turn: %d, applied at the remote: %d)
  unknown commands reconciled:    %d found at the remote, %d never received
  outbox rows:                    %d (completed %d, failed with a reason %d, still open %d)
  effects lost:                   %d (rows missing for a committed command, or open, or completed but absent at the remote)
  rows without a committed command: %d
  commands committed twice:       %d (events per key)
  effects applied twice:          %d (ledger)
  failed rows applied anyway:     %d
  rows delivered more often than claimed: %d
  duplicate raw deliveries:       %d (explained by a worker killed before the duplicate: %d)
  domain calls repeated by resume: %d (deduplicated by key at the remote)
  domain calls disagreeing with their journal entry: %d
  handler calls:                  %d; begun under another attempt's live lease: %d; begun while another ran past its lease: %d; begun after their own lease ended: %d
  commands in flight elsewhere:   %d (ResultInFlight), turns deferred by a sweep: %d, attempts superseded: %d
  kills right after a fault line: %d (drawn at once after abandon, resend_meanwhile, busy_lock, busy_settle, slow_send)
  fault (a) settlement vs phase:  abandoned while running %d (settled %d), resent meanwhile %d (settled %d); kills right after: %d, %d
  fault (b) busy settlement:      write lock held %d times (kills right after %d), settlements refused busy %d (kills right after %d); extensions %d, claims %d, releases %d refused busy
                                  rows whose known outcome met a held file: %d; sent again: %d unexplained, %d after their worker died
  fault (c) slow sends:           %d slow sends (remote: %d), %d rows settled after their claim-time lease ended (kills right after %d); %d lease extensions
                                  releaser: %d calls; rows released %d (all from dead workers: %d from a live one); claims lost: %d at extension, %d at settlement
                                  extensions that found the row just settled by the sweep's own settler: %d
  integrity_check:                %s`,
		f.kills, f.lines, f.together, f.beside,
		f.turns, f.notDelivered, f.abandoned, f.unfinished,
		f.committed, f.rejected, f.unsettled, f.hidden, f.hiddenApplied,
		f.reconciledCompleted, f.reconciledNotReceived,
		f.rows, f.completed, f.failed, f.open, f.lost, f.extraRows, f.committedTwice, f.appliedTwice,
		f.failedButApplied, f.overDelivered, f.duplicates, f.explained, f.commandRepeats, f.commandMismatch,
		f.spans, f.overlapLive, f.overlapPastLease, f.lateStarts,
		c("in_flight"), c("sweep_deferred"), c("superseded"), f.killsAfterFaults(),
		c("abandon"), c("abandon_settled"), c("resend_meanwhile"), c("resend_meanwhile_settled"),
		f.killsAfter["abandon"], f.killsAfter["resend_meanwhile"],
		c("busy_lock"), f.killsAfter["busy_lock"], c("busy_settle"), f.killsAfter["busy_settle"],
		c("busy_extend"), c("busy_claim"), c("busy_release"),
		f.busyRows, f.busySentAgain, f.busyResentDead,
		c("slow_send"), f.slowSends, c("lease_outlived"), f.killsAfter["lease_outlived"], c("extended"),
		c("release_calls"), f.released, f.liveReleases, c("claim_lost_extend"), c("claim_lost_settle"),
		c("extend_after_settle"), f.integrity) + f.errorLines()
}

// errorLines lists the messages the children logged at error level.
func (f figures) errorLines() string {
	var b strings.Builder
	for _, msg := range slices.Sorted(maps.Keys(f.errorLogs)) {
		fmt.Fprintf(&b, "\n  logged at error level:          %d× %q", f.errorLogs[msg], msg)
	}
	return b.String()
}

func (f figures) killsAfterFaults() int {
	n := 0
	for _, k := range f.killsAfter {
		n += k
	}
	return n
}

func (f figures) assert(t *testing.T) {
	t.Helper()
	is := is.New(t)
	is.Equal(f.lost, 0)                        // no intended effect lost
	is.Equal(f.open, 0)                        // no row left pending, dispatching or unknown
	is.Equal(f.appliedTwice, 0)                // no effect applied twice
	is.Equal(f.committedTwice, 0)              // no command committed twice
	is.Equal(f.extraRows, 0)                   // no row without its command
	is.Equal(f.failedButApplied, 0)            // a failed row never reached the remote
	is.Equal(f.overDelivered, 0)               // a row is sent only under a claim
	is.Equal(f.duplicates, f.explained)        // every duplicate delivery has a dead worker's ended lease behind it
	is.Equal(f.unsettled, 0)                   // every command settled
	is.Equal(f.hidden, 0)                      // no command left executing on an abandoned turn, where recovery never looks
	is.Equal(f.unfinished, 0)                  // no turn left for recovery
	is.Equal(f.notDelivered, 0)                // every turn answered, or abandoned by the fault
	is.Equal(f.commandMismatch, 0)             // reconciliations agree with the remote
	is.Equal(f.overlapLive, 0)                 // no command ran in two places at once under a live lease
	is.Equal(f.liveReleases, 0)                // no row released from a live sweep
	is.Equal(f.counts["claim_lost_extend"], 0) // no live sweep lost a claim
	is.Equal(f.counts["claim_lost_settle"], 0) // no settlement found its claim gone
	is.Equal(f.busySentAgain, 0)               // a row whose outcome was known is not sent again because its settlement met a busy file
	is.Equal(f.integrity, "ok")                // PRAGMA integrity_check
	is.True(f.together >= 2)                   // two processes recovered at once
	is.True(f.counts["abandon_settled"] > 0)   // fault (a) fired, and settlements landed on abandoned turns
	is.True(f.counts["busy_settle"] > 0)       // fault (b) fired: settlements were refused busy, and landed
	is.True(f.counts["slow_send"] > 0)         // fault (c) fired: slow sends beside the releaser
	is.True(f.counts["extended"] > 0)          // and leases were extended while they ran
	is.True(f.counts["lease_outlived"] > 0)    // and rows outlived the lease they were claimed with, kept by those extensions
	is.True(f.counts["release_calls"] > 0)     // the releaser ran
}

// audit opens the file after every child is gone and checks it against the
// remote's ledger and what the children reported.
func audit(t *testing.T, db string, rem *remote, h *harness) figures {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, db, sqlitestore.WithExisting())
	if err != nil {
		t.Fatalf("open for audit: %v", err)
	}
	defer store.Close()
	v := rem.snapshot()
	f := figures{kills: h.kills, lines: h.lines, together: h.together, beside: h.beside}
	h.mu.Lock()
	f.counts, f.killsAfter, f.errorLogs = maps.Clone(h.counts), maps.Clone(h.killsAfter), maps.Clone(h.errorLogs)
	f.released, f.liveReleases = h.released, len(h.liveReleases)
	busy := slices.Clone(h.busyRows)
	for _, line := range h.liveReleases {
		t.Logf("released from a live worker: %s", line)
	}
	h.mu.Unlock()
	f.spans, f.overlapLive, f.overlapPastLease, f.lateStarts, f.slowSends = v.spans, v.overlapLive, v.overlapPastLease, v.lateStarts, v.slowSends
	for _, o := range v.overlaps {
		t.Logf("handler span: %s", o)
	}

	if err := store.ReadDB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&f.integrity); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == turnframe.MaxLimit {
		t.Fatalf("%d outbox rows or more: too many to audit in one listing", len(rows))
	}
	byKey := map[string]turnframe.OutboxRecord{}
	for _, r := range rows {
		byKey[string(r.Account)+"\x00"+string(r.Key)] = r
		f.rows++
		switch r.Status {
		case turnframe.OutboxCompleted:
			f.completed++
		case turnframe.OutboxFailed:
			f.failed++
			if r.LastCode == "" {
				f.lost++ // failed without a reason
			}
			if v.applied[r.RemoteKey()] > 0 {
				f.failedButApplied++
			}
		default:
			f.open++
			t.Logf("open row %v %s: %v", r.ID, r.Key, r.Status)
		}
		ds := v.deliveries[r.RemoteKey()]
		if len(ds) > r.Attempts {
			f.overDelivered++
		}
		applier := ""
		for _, d := range ds {
			if d.applied {
				applier = d.worker
			}
			if d.dup {
				f.duplicates++
				if applier != "" && v.diedBefore(applier, d.seq) {
					f.explained++
				} else {
					t.Logf("unexplained duplicate delivery of %s: attempt %d by %s, applied by %s", r.RemoteKey(), d.attempt, d.worker, applier)
				}
			}
		}
	}
	for _, b := range busy {
		f.busyRows++
		sender := ""
		for _, d := range v.deliveries[b.key] {
			switch {
			case d.attempt == b.attempt:
				sender = d.worker
			case d.attempt > b.attempt && sender != "" && v.diedBefore(sender, d.seq):
				f.busyResentDead++
			case d.attempt > b.attempt:
				f.busySentAgain++
				t.Logf("row %s sent again (attempt %d by %s) after attempt %d's known outcome met a busy file", b.key, d.attempt, d.worker, b.attempt)
			}
		}
	}
	for k, n := range v.applied {
		if n > 1 {
			f.appliedTwice++
			t.Logf("applied %d times: %s", n, k)
		}
	}

	expected := f.auditTurns(t, store, byKey, v)
	for k := range byKey {
		if !expected[k] {
			f.extraRows++
		}
	}
	if err := store.ReadDB().QueryRowContext(ctx,
		"SELECT COUNT(*) FROM (SELECT 1 FROM events GROUP BY account, key HAVING COUNT(*) > 1)").Scan(&f.committedTwice); err != nil {
		t.Fatal(err)
	}
	unfinished, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	f.unfinished = len(unfinished)
	return f
}

// auditTurns checks every turn and every journal entry, and returns the
// outbox rows the committed commands must have made.
func (f *figures) auditTurns(t *testing.T, store *sqlitestore.Store, byKey map[string]turnframe.OutboxRecord, v ledgerView) map[string]bool {
	t.Helper()
	ctx := context.Background()
	turns, err := store.ReadDB().QueryContext(ctx, "SELECT account, id FROM turns ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	type turnRef struct {
		account turnframe.AccountID
		id      turnframe.TurnID
	}
	var refs []turnRef
	for turns.Next() {
		var acct, id string
		if err := turns.Scan(&acct, &id); err != nil {
			t.Fatal(err)
		}
		tid, err := turnframe.ParseTurnID(id)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, turnRef{turnframe.AccountID(acct), tid})
	}
	if err := turns.Err(); err != nil {
		t.Fatal(err)
	}
	turns.Close()

	expected := map[string]bool{}
	for _, ref := range refs {
		f.turns++
		m, err := store.TurnPhase(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Phase {
		case turnframe.PhaseDelivered:
		case turnframe.PhaseAbandoned:
			rec, err := store.Replay(ctx, ref.account, ref.id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.AbandonCode == codeFaultAbandon {
				f.abandoned++
			} else {
				f.notDelivered++
			}
		default:
			f.notDelivered++
			t.Logf("turn %v left %v", ref.id, m.Phase)
		}
		entries, err := store.ForTurn(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			f.auditEntry(t, store, e, m.Phase, byKey, v, expected)
		}
	}
	return expected
}

func (f *figures) auditEntry(t *testing.T, store *sqlitestore.Store, e turnframe.JournalEntry, phase turnframe.TurnPhase,
	byKey map[string]turnframe.OutboxRecord, v ledgerView, expected map[string]bool) {
	t.Helper()
	ctx := context.Background()
	cmdKey := commandRemoteKey(e.Account, e.Key)
	atRemote := v.applied[cmdKey] > 0
	for _, d := range v.deliveries[cmdKey] {
		if d.dup {
			f.commandRepeats++
		}
	}
	switch e.Status {
	case turnframe.JournalCommitted:
		f.committed++
		evs, err := store.EventsByID(ctx, e.Account, e.EventIDs)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case callsRemote(e.Name) && len(evs) == 0: // committed by a reconciliation, without events
			f.reconciledCompleted++
			if !atRemote {
				f.commandMismatch++
			}
		case len(evs) != 1 || evs[0].Key != e.Key:
			f.lost++
		case callsRemote(e.Name) && !atRemote:
			f.commandMismatch++
		}
		n := expectedRows(e.Name)
		for i := range n {
			k := string(e.Account) + "\x00" + string(turnframe.OutboxKey(e.Key, i, n))
			expected[k] = true
			r, ok := byKey[k]
			switch {
			case !ok:
				f.lost++
			case r.Status == turnframe.OutboxCompleted && v.applied[r.RemoteKey()] == 0:
				f.lost++ // completed, yet the remote never applied it
			}
		}
	case turnframe.JournalRejected:
		f.rejected++
		if e.Code == codeNotReceived {
			f.reconciledNotReceived++
			if atRemote {
				f.commandMismatch++
			}
		}
	default:
		f.unsettled++
		if phase == turnframe.PhaseAbandoned {
			f.hidden++
			if callsRemote(e.Name) && atRemote {
				f.hiddenApplied++
			}
		}
		t.Logf("command %s/%s (%s) left %v under attempt %v on a %v turn; applied at the remote: %t",
			e.Account, e.Key, e.Name, e.Status, e.Attempt, phase, atRemote)
	}
}
