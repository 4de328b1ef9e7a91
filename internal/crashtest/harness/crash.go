package harness

import (
	"context"
	"fmt"
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
)

// crashKills is how many children TestCrashRecovery kills per remote kind:
// TURNFRAME_CRASH_KILLS for the long run, def otherwise (and in -short).
func crashKills(t *testing.T, def int) int {
	if v := os.Getenv("TURNFRAME_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TURNFRAME_CRASH_KILLS=%q: want a positive number", v)
		}
		return n
	}
	return def
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

// CrashRecovery runs the crash harness on b once per kind of remote (see
// remoteDedup): the same workload, from the same seed, against a remote
// that deduplicates, one that can be asked, and one that can do neither,
// each declared as such to the library. Each run is a subtest
// (…/dedup, …/asked, …/neither). Once all three ran, the figures are
// printed side by side, and the fault points must have fired in the three
// runs together (fault (b) only when b has a Locker). The test binary must
// run Main with the same b.
//
// kills is how many children it kills per kind unless TURNFRAME_CRASH_KILLS
// says otherwise (the long run); TURNFRAME_CRASH_SEED sets the seed.
func CrashRecovery(t *testing.T, b Backend, kills int) {
	kills, seed := crashKills(t, kills), crashSeed(t)
	t.Logf("seed %d, %d kills per remote kind (replay the draws with TURNFRAME_CRASH_SEED=%d; kill points still depend on timing)", seed, kills, seed)
	var runs []figures
	for i, kind := range remoteKinds {
		t.Run(kind, func(t *testing.T) {
			f := crashRun(t, b, kind, i, kills, seed)
			runs = append(runs, f)
			f.assert(t)
		})
	}
	if len(runs) == 0 {
		return
	}
	t.Logf("crash runs, seed %d:\n%s", seed, summary(runs))
	if len(runs) < len(remoteKinds) {
		return // a kind was left out (-run) or stopped half way: the faults fired in too few runs to count
	}
	is := is.New(t)
	total := map[string]int{}
	for _, f := range runs {
		for k, n := range f.counts {
			total[k] += n
		}
	}
	is.True(total["abandon_settled"] > 0) // fault (a) fired, and settlements landed on abandoned turns
	is.True(total["local_refused"] > 0)   // and local commands' commits were refused whole on them
	if runs[0].locker {
		is.True(total["busy_settle"] > 0) // fault (b) fired: settlements were refused busy, and landed
	}
	is.True(total["slow_send"] > 0)      // fault (c) fired: slow sends beside the expirer
	is.True(total["extended"] > 0)       // and leases were extended while they ran
	is.True(total["lease_outlived"] > 0) // and rows outlived the lease they were claimed with, kept by those extensions
	is.True(total["app_error"] > 0)      // the app's writes failed in some commits, which left nothing (the audit's app rows)
}

// crashRun runs a real workload in two child processes at once on one
// database, against a remote of kind, with the fault points of
// faults.go firing and a third process expiring ended claims all
// along. After a random number of progress lines it kills one child, or
// both, with SIGKILL, and starts new ones: a new child recovers beside a
// live one, or two recover at once. Two last children drain everything at
// once, until nothing is open — what needs a person is not open — and
// every lease has ended (bounded by drainDeadline). Then the audit: nothing
// may be lost, applied twice, run in two places at once, or left open.
// Every turn is a message of the platform (platform.go), redelivered
// at least once; the audit holds its log to the database: one turn per message.
//
// Every random draw — kill points in progress lines, victims, command
// kinds, fault points, the remote's answers — comes from the seed and the
// kind; TURNFRAME_CRASH_SEED replays them. Kill points are counted in
// lines, so where a kill lands still depends on timing.
func crashRun(t *testing.T, b Backend, kind string, index, kills int, seed uint64) figures {
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, uint64(index)+1))
	rem := newRemote(t, seed, true, kind != remoteNeither)
	dir := t.TempDir()
	db := b.Create(t) // two children start at once: neither should meet a half-migrated database
	h := newHarness(t, b, seed, rem, envDB+"="+db, envRemote+"="+rem.srv.URL, envKind+"="+kind,
		envSeed+"="+strconv.FormatUint(seed, 10), envFaults+"=1")
	h.platform = filepath.Join(dir, "platform.log")
	h.env = append(h.env, envPlatform+"="+h.platform)

	expirer := h.start("expirer", true)
	live := [2]*proc{h.start("work", false), h.start("work", false)}
	h.together++
	h.afterKills = h.inc // every child started from here on follows a kill
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
	drainBegan := time.Now()
	drains := [2]*proc{h.start("drain", false), h.start("drain", false)}
	h.together++
	for _, p := range drains {
		if err := p.finish(); err != nil {
			t.Fatalf("%s, seed %d: %s: %v\nstderr:\n%s", kind, seed, p.name, err, p.stderr.String())
		}
		h.tallyErrors(p)
	}
	if err := expirer.finish(); err != nil {
		t.Fatalf("%s, seed %d: expirer: %v\nstderr:\n%s", kind, seed, err, expirer.stderr.String())
	}
	h.tallyErrors(expirer)
	drained := time.Since(drainBegan)
	f := audit(t, db, kind, rem, h)
	f.drain = drained
	f.store, f.locker = b.Name(), hasLocker(t, b, db)
	f.kind, f.seed, f.duration = kind, seed, time.Since(began)
	t.Logf("crash run on %s against a remote that %s, seed %d, %v (the drain %v):\n%s", f.store, kindPhrase[kind], seed, f.duration.Round(time.Second), f.drain.Round(time.Second), f)
	return f
}

// kindPhrase says what a remote of each kind can do, for the log.
var kindPhrase = map[string]string{
	remoteDedup:   "deduplicates (Remote{Deduplicates: 24h})",
	remoteAsked:   "can be asked (Remote{Verifier})",
	remoteNeither: "can do neither (Remote{})",
}

// hasLocker reports whether b can hold writes up (fault b).
func hasLocker(t *testing.T, b Backend, db string) bool {
	t.Helper()
	l, err := b.Locker(context.Background(), db)
	if err != nil {
		t.Fatalf("%s: locker: %v", b.Name(), err)
	}
	if l == nil {
		return false
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return true
}

// busyRow is a row whose settlement met a held database (fault b) after a send
// whose outcome the dispatcher knew.
type busyRow struct {
	key     string // its RemoteKey
	attempt int
}

// harness is the parent's side of a crash run: it starts and kills the
// children, and reads what they report.
type harness struct {
	t       *testing.T
	backend Backend
	seed    uint64
	rem     *remote
	env     []string
	notify  chan struct{} // poked on every progress line of every child
	killNow chan *proc    // a working child that just reported a fault in killAfter, drawn for a kill
	inc     int           // the next child's incarnation
	// platform is the path of the platform's log; afterKills the first
	// incarnation started after a kill.
	platform   string
	afterKills int

	kills, lines, together, beside int // (parent goroutine only)

	mu           sync.Mutex
	dead         map[string]bool // workers killed and reaped
	counts       map[string]int  // fault points and other events the children reported
	killsAfter   map[string]int  // kills that came right after a fault line
	busyRows     []busyRow
	expired      int            // rows expired, by anyone
	liveExpiries []string       // rows expired from a worker that was not dead
	errorLogs    map[string]int // messages the children logged at error level
	errorSamples []string       // the first few such lines, whole
}

func newHarness(t *testing.T, b Backend, seed uint64, rem *remote, env ...string) *harness {
	return &harness{
		t: t, backend: b, seed: seed, rem: rem, env: env, notify: make(chan struct{}, 1), killNow: make(chan *proc, 8),
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
	case "R": // R ROW WORKER EXPIRER: a row expired from WORKER's claim
		h.expired++
		if len(f) < 3 || !h.dead[f[2]] {
			h.liveExpiries = append(h.liveExpiries, line)
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
		if len(h.errorSamples) < 5 {
			h.errorSamples = append(h.errorSamples, p.name+": "+line)
		}
	}
}

// summary is the figures of several runs as a table, one line per kind.
func summary(runs []figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-8s %6s %6s %9s %5s %5s %13s %22s %10s %16s %9s\n",
		"kind", "kills", "turns", "committed", "rows", "lost", "applied twice", "resolved automatically", "escalated", "lease-ended exp.", "duration")
	for _, f := range runs {
		fmt.Fprintf(&b, "  %-8s %6d %6d %9d %5d %5d %13d %22d %10d %16s %9v\n",
			f.kind, f.kills, f.turns, f.committed, f.rows, f.lost, f.appliedTwice, f.resolvedAutomatically(),
			f.escalatedEntries+f.escalatedRows, fmt.Sprintf("%d rows, %d cmds", f.expiredRows, f.deadAttempts), f.duration.Round(time.Second))
	}
	fmt.Fprintf(&b, "\n  %-8s %8s %12s %8s %5s %10s %11s %12s %13s\n",
		"kind", "messages", "redeliveries", "answered", "began", "after kill", "first found", "turns per id", "applied twice")
	for _, f := range runs {
		m := f.msgs
		fmt.Fprintf(&b, "  %-8s %8d %12d %8d %5d %10d %11d %12s %13d\n",
			f.kind, m.messages, m.redelivered+m.redeliveryBegan, m.redelivered, m.redeliveryBegan,
			m.redeliveredAfterKill, m.firstFoundRedelivered, m.turnsPerID(), f.appliedTwice)
	}
	return strings.TrimRight(b.String(), "\n")
}
