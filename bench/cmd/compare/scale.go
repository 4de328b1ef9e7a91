package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
	"github.com/turnframe/turnframe/sqlitestore"
)

// scaleFile is one seeded file whose claim latency is measured.
type scaleFile struct {
	label string
	path  string
	lat   map[bench.Sync][]time.Duration
}

// measureClaims opens each file at each setting and measures claims in
// rounds, alternating files so noise hits them alike.
func (r *run) measureClaims(files []*scaleFile) error {
	const rounds = 4
	per := max(1, r.sz.Claims/rounds)
	for _, s := range r.syncs {
		stores := make([]*sqlitestore.Store, len(files))
		for i, f := range files {
			st, err := bench.OpenStore(r.ctx, f.path, s)
			if err != nil {
				return err
			}
			defer st.Close()
			stores[i] = st
			if f.lat == nil {
				f.lat = map[bench.Sync][]time.Duration{}
			}
		}
		for range rounds {
			for i, f := range files {
				lat, err := bench.ClaimLatencies(r.ctx, stores[i], per)
				if err != nil {
					return fmt.Errorf("%s: %w", f.label, err)
				}
				f.lat[s] = append(f.lat[s], lat...)
			}
		}
		for _, st := range stores {
			st.Close()
		}
	}
	return nil
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func (r *run) latencyTable(title, intro string, files []*scaleFile) table {
	t := table{title: title, intro: intro, header: []string{"file"}}
	for _, s := range r.syncs {
		t.header = append(t.header, "median ms "+string(s), "p90 ms "+string(s))
	}
	for _, f := range files {
		row := []string{f.label}
		for _, s := range r.syncs {
			row = append(row, ms(quantile(f.lat[s], 0.5)), ms(quantile(f.lat[s], 0.9)))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func medianRatio(a, b *scaleFile, s bench.Sync) float64 {
	return float64(quantile(a.lat[s], 0.5)) / float64(quantile(b.lat[s], 0.5))
}

// scale: claim latency against table size and against a blocked head.
func (r *run) scale() {
	ctx := r.ctx
	due := time.Now().Add(-time.Minute)
	seed := func(label string, batches ...bench.SeedRows) *scaleFile {
		path := r.folder.File("scale")
		st, err := bench.OpenStore(ctx, path, bench.SyncFull) // creates the schema
		if err != nil {
			r.fail("scale %s: %v", label, err)
			return nil
		}
		st.Close()
		start := time.Now()
		if err := bench.Seed(ctx, path, batches...); err != nil {
			r.fail("scale %s: %v", label, err)
			return nil
		}
		r.logf("scale    seeded %s in %v", label, time.Since(start).Round(time.Millisecond))
		return &scaleFile{label: label, path: path}
	}
	finished := func(n int) bench.SeedRows {
		return bench.SeedRows{N: n, Status: "completed", Due: due.Add(-time.Hour)}
	}
	dueRows := bench.SeedRows{N: r.sz.Due, Status: "pending", Due: due}

	small := seed(fmt.Sprintf("%d finished + %d due", r.sz.ScaleSmall, r.sz.Due), finished(r.sz.ScaleSmall), dueRows)
	large := seed(fmt.Sprintf("%d finished + %d due", r.sz.ScaleLarge, r.sz.Due), finished(r.sz.ScaleLarge), dueRows)
	if small != nil && large != nil {
		if err := r.measureClaims([]*scaleFile{small, large}); err != nil {
			r.fail("scale: %v", err)
		} else {
			r.plots.addClaims("sqlitestore", r.sz.ScaleSmall, small, r.syncs)
			r.plots.addClaims("sqlitestore", r.sz.ScaleLarge, large, r.syncs)
			t := r.latencyTable("4a. scale: claim latency against finished rows",
				fmt.Sprintf("`Store.ClaimDue` of 16 rows (one transaction, commit included), %d claims per file and setting, in alternating rounds. Rows seeded with SQL into turnframe's schema.", r.sz.Claims),
				[]*scaleFile{small, large})
			t.notes = append(t.notes, target(fmt.Sprintf("scale: claim latency at %d finished ÷ at %d (median, FULL)", r.sz.ScaleLarge, r.sz.ScaleSmall),
				medianRatio(large, small, bench.SyncFull), 1.2, false))
			r.tables = append(r.tables, t)
		}
	}
	for _, f := range []*scaleFile{small, large} {
		if f != nil {
			bench.Remove(f.path)
		}
	}

	// The blocked head: one order key's first row is OutcomeUnknown and its
	// successors, due first, must wait; every claim reads past them. The
	// unblocked file has the same rows with no order key on the head.
	head := r.sz.BlockedHead
	unknown := bench.SeedRows{N: 1, Status: "outcome_unknown", Due: due.Add(-2 * time.Minute), OrderKey: "k"}
	blocked := seed(fmt.Sprintf("%d-row blocked head", head), finished(r.sz.ScaleSmall), unknown,
		bench.SeedRows{N: head, Status: "pending", Due: due.Add(-time.Minute), OrderKey: "k"}, dueRows)
	open := seed(fmt.Sprintf("%d-row unblocked head", head), finished(r.sz.ScaleSmall), unknown,
		bench.SeedRows{N: head, Status: "pending", Due: due.Add(-time.Minute)}, dueRows)
	if blocked != nil && open != nil {
		if err := r.measureClaims([]*scaleFile{open, blocked}); err != nil {
			r.fail("scale blocked head: %v", err)
		} else {
			t := r.latencyTable("4b. scale: a blocked head",
				fmt.Sprintf("Both files: %d finished rows, one OutcomeUnknown row of order key k, then %d rows due first, then %d more due. Blocked: the %d head rows carry order key k, so none is claimable; unblocked: they carry no order key.",
					r.sz.ScaleSmall, head, r.sz.Due, head),
				[]*scaleFile{open, blocked})
			t.notes = append(t.notes, target(fmt.Sprintf("scale: claim latency with a %d-row blocked head ÷ unblocked (median, FULL)", head),
				medianRatio(blocked, open, bench.SyncFull), 2, false))
			r.tables = append(r.tables, t)
		}
	}
	for _, f := range []*scaleFile{blocked, open} {
		if f != nil {
			bench.Remove(f.path)
		}
	}
}

// The child processes: the compare binary run again with childEnv set.
const (
	childEnv     = "TURNFRAME_BENCH_CHILD" // "drain", "pgdrain" or "riverdrain"
	childPath    = "TURNFRAME_BENCH_PATH"
	childSync    = "TURNFRAME_BENCH_SYNC"
	childWorker  = "TURNFRAME_BENCH_WORKER"
	childIDs     = "TURNFRAME_BENCH_IDS" // file to write sent ids to, one a line; "" for none
	childConcurr = "TURNFRAME_BENCH_CONCURRENCY"
)

// childResult is what a child prints on stdout, as JSON.
type childResult struct {
	Start, End   int64 // Unix nanoseconds around the drain
	Drained      int
	HWMBeforeKiB int64 // VmHWM after opening the store, before draining
	HWMAfterKiB  int64 // VmHWM after draining
	Error        string
}

// runChild drains the file named in the environment with one dispatcher,
// records what it sent and reports as JSON.
func runChild(kind string) int {
	var res childResult
	switch kind {
	case "drain":
		res = childDrain()
	case childPGDrain:
		res = childPGStoreDrain()
	case childRiverDrain:
		res = childRiverPGDrain()
	default:
		res.Error = "unknown child kind " + kind
	}
	json.NewEncoder(os.Stdout).Encode(res)
	if res.Error != "" {
		return 1
	}
	return 0
}

func childDrain() (res childResult) {
	ctx := contextBackground()
	conc, _ := strconv.Atoi(os.Getenv(childConcurr))
	st, err := bench.OpenStore(ctx, os.Getenv(childPath), bench.Sync(os.Getenv(childSync)))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer st.Close()
	var (
		mu  sync.Mutex
		ids []turnframe.OutboxID
	)
	sender := &bench.NoopSender{}
	if os.Getenv(childIDs) != "" {
		sender.Record = func(id turnframe.OutboxID) {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}
	}
	d := bench.NewDispatcher(st, sender, os.Getenv(childWorker), max(1, conc))
	res.HWMBeforeKiB = vmHWM()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		res.Error = "waiting for go: " + err.Error()
		return res
	}
	res.Start = time.Now().UnixNano()
	res.Drained, err = bench.DrainDispatcher(ctx, d, 0)
	res.End = time.Now().UnixNano()
	res.HWMAfterKiB = vmHWM()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	if p := os.Getenv(childIDs); p != "" {
		var b bytes.Buffer
		for _, id := range ids {
			b.WriteString(id.String())
			b.WriteByte('\n')
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			res.Error = err.Error()
		}
	}
	return res
}

// vmHWM returns this process's peak resident set size in KiB.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// proc is a running drain child. It opens the store, says "ready" on its
// first stdout line and waits for a line on stdin before draining, so that
// several children start draining together, not one process start-up
// apart.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startChild starts a drain child on path and waits until it is ready.
func startChild(path string, s bench.Sync, worker, idsFile string, concurrency int) (*proc, error) {
	return startChildKind("drain", path, string(s), worker, idsFile, concurrency)
}

// startChildKind starts a child of kind on path (a file, or a schema's URL)
// and waits until it is ready.
func startChildKind(kind, path, s, worker, idsFile string, concurrency int) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		childEnv+"="+kind, childPath+"="+path, childSync+"="+s,
		childWorker+"="+worker, childIDs+"="+idsFile, childConcurr+"="+strconv.Itoa(concurrency))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("child did not get ready: %q, %v", line, err)
	}
	return p, nil
}

// goAhead lets a ready child drain.
func (p *proc) goAhead() error {
	_, err := io.WriteString(p.stdin, "go\n")
	p.stdin.Close()
	return err
}

// wait reads the child's report and waits for it to exit.
func (p *proc) wait() (childResult, error) {
	rest, rerr := io.ReadAll(p.out)
	werr := p.cmd.Wait()
	var res childResult
	if err := json.Unmarshal(rest, &res); err != nil {
		return res, fmt.Errorf("child output %q: %v (read: %v, exit: %v)", rest, err, rerr, werr)
	}
	if res.Error != "" {
		return res, fmt.Errorf("child: %s", res.Error)
	}
	return res, werr
}

// seedDue makes a fresh turnframe file holding n due rows.
func (r *run) seedDue(label string, n int) (string, error) {
	path := r.folder.File(label)
	st, err := bench.OpenStore(r.ctx, path, bench.SyncFull)
	if err != nil {
		return "", err
	}
	st.Close()
	return path, bench.Seed(r.ctx, path, bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)})
}

// memory: peak RSS of a process draining a small and a large backlog.
func (r *run) memory() {
	t := table{title: "4c. memory: peak RSS while draining",
		intro:  "Each figure is a fresh child process (the compare binary re-run) that opens the store and drains the file with `RunOnce` at Concurrency 8, FULL; VmHWM from /proc/self/status, so peaks of different runs never mix. Rows are seeded by the parent before the child starts.",
		header: []string{"backlog", "VmHWM after open (MiB)", "VmHWM after drain (MiB)", "rows/s"}}
	hwm := map[int]int64{}
	for _, n := range []int{r.sz.RSSSmall, r.sz.RSSLarge} {
		path, err := r.seedDue("memory", n)
		if err != nil {
			r.fail("memory %d: %v", n, err)
			continue
		}
		p, err := startChild(path, bench.SyncFull, "mem", "", 8)
		if err != nil {
			r.fail("memory %d: %v", n, err)
			continue
		}
		p.goAhead()
		res, err := p.wait()
		bench.Remove(path)
		if err != nil {
			r.fail("memory %d: %v", n, err)
			continue
		}
		if res.Drained != n {
			r.fail("memory %d: drained %d", n, res.Drained)
		}
		hwm[n] = res.HWMAfterKiB
		secs := float64(res.End-res.Start) / 1e9
		r.logf("memory   %d rows: VmHWM %d KiB (open %d KiB)", n, res.HWMAfterKiB, res.HWMBeforeKiB)
		t.rows = append(t.rows, []string{strconv.Itoa(n), fmt.Sprintf("%.1f", float64(res.HWMBeforeKiB)/1024), fmt.Sprintf("%.1f", float64(res.HWMAfterKiB)/1024), fmt.Sprintf("%.0f", float64(n)/secs)})
	}
	if a, b := hwm[r.sz.RSSSmall], hwm[r.sz.RSSLarge]; a > 0 && b > 0 {
		t.notes = append(t.notes, target(fmt.Sprintf("memory: peak RSS draining %d ÷ draining %d rows", r.sz.RSSLarge, r.sz.RSSSmall), float64(b)/float64(a), 1.2, false)+
			" (\"does not grow with the backlog\", read as within 20%)")
	}
	r.tables = append(r.tables, t)
}

// twoProc: two processes drain one file; no row may be sent twice.
func (r *run) twoProc() {
	n := r.sz.TwoProc
	t := table{title: fmt.Sprintf("5. two processes draining one file (N = %d)", n),
		intro:  "Child processes (the compare binary re-run), each one dispatcher at Concurrency 8 with its own worker id, `RunOnce` until a sweep claims nothing. Each child records every id its sender was handed; the parent checks that no id was sent twice, that every row was sent, and that every row is Completed. One process alone on the same kind of file is the reference. Rate = rows ÷ (last child's end − first child's start).",
		header: []string{"setting", "one process rows/s", "two processes rows/s", "two ÷ one", "rows sent twice", "rows never sent"}}
	for _, s := range r.syncs {
		one, err := r.drainProcs(s, n, 1)
		if err != nil {
			r.fail("twoproc %s, one process: %v", s, err)
			continue
		}
		two, err := r.drainProcs(s, n, 2)
		if err != nil {
			r.fail("twoproc %s, two processes: %v", s, err)
			continue
		}
		t.rows = append(t.rows, []string{string(s), fmt.Sprintf("%.0f", one.rate), fmt.Sprintf("%.0f", two.rate),
			fmt.Sprintf("%.2f", two.rate/one.rate), strconv.Itoa(two.dups), strconv.Itoa(two.missing)})
		t.notes = append(t.notes, fmt.Sprintf("%s: the two processes sent %s rows.", s, strings.Join(two.split, " + ")))
	}
	r.tables = append(r.tables, t)
}

type procRun struct {
	rate          float64
	dups, missing int
	split         []string
}

func (r *run) drainProcs(s bench.Sync, n, procs int) (procRun, error) {
	var pr procRun
	path, err := r.seedDue("twoproc", n)
	if err != nil {
		return pr, err
	}
	defer bench.Remove(path)
	type child struct {
		p    *proc
		ids  string
		res  childResult
		werr error
	}
	kids := make([]*child, procs)
	for i := range kids {
		ids := fmt.Sprintf("%s.ids-%d", path, i)
		defer os.Remove(ids)
		p, err := startChild(path, s, fmt.Sprintf("proc-%d", i), ids, 8)
		if err != nil {
			return pr, err
		}
		kids[i] = &child{p: p, ids: ids}
	}
	for _, k := range kids {
		if err := k.p.goAhead(); err != nil {
			return pr, err
		}
	}
	for _, k := range kids {
		k.res, k.werr = k.p.wait()
	}
	seen := map[string]int{}
	var first, last int64
	for i, k := range kids {
		if k.werr != nil {
			return pr, k.werr
		}
		if i == 0 || k.res.Start < first {
			first = k.res.Start
		}
		last = max(last, k.res.End)
		f, err := os.Open(k.ids)
		if err != nil {
			return pr, err
		}
		sc := bufio.NewScanner(f)
		sent := 0
		for sc.Scan() {
			seen[sc.Text()]++
			sent++
		}
		f.Close()
		pr.split = append(pr.split, strconv.Itoa(sent))
	}
	for _, c := range seen {
		if c > 1 {
			pr.dups += c - 1
		}
	}
	pr.missing = n - len(seen)
	pr.rate = float64(n) / (float64(last-first) / 1e9)
	st, err := bench.OpenStore(r.ctx, path, s)
	if err != nil {
		return pr, err
	}
	defer st.Close()
	done, err := bench.CountStatus(r.ctx, st.ReadDB(), "completed")
	if err != nil {
		return pr, err
	}
	r.logf("twoproc  %s %d proc: %.0f rows/s, sent %v, %d dup, %d missing, %d completed", s, procs, pr.rate, pr.split, pr.dups, pr.missing, done)
	if pr.dups != 0 {
		r.fail("twoproc %s, %d processes: %d rows sent twice", s, procs, pr.dups)
	}
	if pr.missing != 0 || done != n {
		r.fail("twoproc %s, %d processes: %d rows never sent, %d of %d completed", s, procs, pr.missing, done, n)
	}
	return pr, nil
}
