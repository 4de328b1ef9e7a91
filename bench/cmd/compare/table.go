package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe/bench"
)

// contender is one thing measured in a workload. open builds its fixture
// for n rows (or turns) on a fresh file at path, untimed, and returns a
// session whose steps the runner times.
type contender struct {
	name string
	open func(path string, s bench.Sync, n int) (*session, error)
}

// session is one contender's run, driven step by step so that contenders
// can be interleaved chunk by chunk.
type session struct {
	// step does about k more rows and returns how many it did; it is the
	// only timed part. 0 means there was nothing left.
	step func(k int) (int, error)
	// finish checks, untimed, that everything was done, and returns any
	// extra figures to report. May be nil.
	finish func() (map[string]float64, error)
	close  func()
}

// chunks is how many pieces each contender's N is cut into: every
// contender runs one piece in turn, in an order that rotates, so a burst of
// load from elsewhere on a shared machine hits all of them alike.
const chunks = 10

type cell struct {
	contender string
	sync      bench.Sync
}

// measureAll runs every contender at every setting, reps times, and returns
// the median measure of each. Within one setting all contenders' files are
// open at once and their N rows are run in interleaved chunks. A contender
// that fails is recorded as a failure and left out.
func (r *run) measureAll(workload string, n int, cs []contender) map[cell]bench.Measure {
	got := map[cell][]bench.Measure{}
	for rep := range r.sz.Reps {
		for _, s := range r.syncs {
			for name, m := range r.measureInterleaved(workload, n, s, rep, cs) {
				got[cell{name, s}] = append(got[cell{name, s}], m)
			}
		}
	}
	med := map[cell]bench.Measure{}
	for k, ms := range got {
		slices.SortFunc(ms, func(a, b bench.Measure) int { return cmpF(a.PerSecond(), b.PerSecond()) })
		med[k] = ms[len(ms)/2]
	}
	return med
}

func (r *run) measureInterleaved(workload string, n int, s bench.Sync, rep int, cs []contender) map[string]bench.Measure {
	type live struct {
		c    contender
		ss   *session
		path string
		m    bench.Measure
		dead bool
	}
	var ls []*live
	for _, c := range cs {
		path := r.folder.File(workload)
		ss, err := c.open(path, s, n)
		if err != nil {
			r.fail("%s / %s / %s: set-up: %v", workload, c.name, s, err)
			bench.Remove(path)
			continue
		}
		ls = append(ls, &live{c: c, ss: ss, path: path})
	}
	chunk := (n + chunks - 1) / chunks
	for i := range chunks {
		for j := range ls {
			l := ls[(i+j+rep)%len(ls)]
			if l.dead || l.m.N >= n {
				continue
			}
			k := min(chunk, n-l.m.N)
			start := time.Now()
			did, err := l.ss.step(k)
			l.m.Elapsed += time.Since(start)
			l.m.N += did
			if err != nil {
				r.fail("%s / %s / %s: %v", workload, l.c.name, s, err)
				l.dead = true
			} else if did == 0 {
				r.fail("%s / %s / %s: did %d of %d", workload, l.c.name, s, l.m.N, n)
				l.dead = true
			}
		}
	}
	out := map[string]bench.Measure{}
	for _, l := range ls {
		if !l.dead && l.ss.finish != nil {
			extra, err := l.ss.finish()
			if err != nil {
				r.fail("%s / %s / %s: %v", workload, l.c.name, s, err)
				l.dead = true
			}
			l.m.Extra = extra
		}
		l.ss.close()
		bench.Remove(l.path)
		if l.dead {
			continue
		}
		r.logf("%-8s %-36s %-6s %9.0f /s  (%d in %v)", workload, l.c.name, s, l.m.PerSecond(), l.m.N, l.m.Elapsed.Round(time.Millisecond))
		out[l.c.name] = l.m
	}
	return out
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// table is one markdown table of the report.
type table struct {
	title  string
	intro  string
	header []string
	rows   [][]string
	notes  []string
}

// rateTable turns medians into a table: one row per contender, rows/s per
// setting, and for each subject the ratio subject ÷ contender per setting.
func (r *run) rateTable(title, intro, unit string, cs []contender, subjects []string, med map[cell]bench.Measure) table {
	t := table{title: title, intro: intro}
	t.header = []string{"contender"}
	for _, s := range r.syncs {
		t.header = append(t.header, fmt.Sprintf("%s %s", unit, s))
	}
	for _, subj := range subjects {
		for _, s := range r.syncs {
			t.header = append(t.header, fmt.Sprintf("%s ÷ this, %s", subj, s))
		}
	}
	for _, c := range cs {
		row := []string{c.name}
		for _, s := range r.syncs {
			row = append(row, rate(med, c.name, s))
		}
		for _, subj := range subjects {
			for _, s := range r.syncs {
				row = append(row, ratioCell(med, subj, c.name, s))
			}
		}
		t.rows = append(t.rows, row)
	}
	for _, c := range cs {
		for _, s := range r.syncs {
			m, ok := med[cell{c.name, s}]
			if !ok || len(m.Extra) == 0 {
				continue
			}
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
				parts = append(parts, fmt.Sprintf("%s %.2f", k, m.Extra[k]))
			}
			t.notes = append(t.notes, fmt.Sprintf("%s, %s: %s", c.name, s, strings.Join(parts, "; ")))
		}
	}
	return t
}

func rate(med map[cell]bench.Measure, name string, s bench.Sync) string {
	m, ok := med[cell{name, s}]
	if !ok {
		return "failed"
	}
	return fmt.Sprintf("%.0f", m.PerSecond())
}

// ratio returns a ÷ b at setting s, or false when either is missing.
func ratio(med map[cell]bench.Measure, a, b string, s bench.Sync) (float64, bool) {
	ma, okA := med[cell{a, s}]
	mb, okB := med[cell{b, s}]
	if !okA || !okB || mb.PerSecond() == 0 {
		return 0, false
	}
	return ma.PerSecond() / mb.PerSecond(), true
}

func ratioCell(med map[cell]bench.Measure, a, b string, s bench.Sync) string {
	if a == b {
		return "—"
	}
	x, ok := ratio(med, a, b, s)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", x)
}

func (t table) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", t.title)
	if t.intro != "" {
		fmt.Fprintf(&b, "%s\n\n", t.intro)
	}
	if len(t.header) > 0 {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(t.header, " | "))
		fmt.Fprintf(&b, "|%s\n", strings.Repeat("---|", len(t.header)))
		for _, row := range t.rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
		b.WriteString("\n")
	}
	for _, n := range t.notes {
		fmt.Fprintf(&b, "* %s\n", n)
	}
	if len(t.notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// target formats one target line: met or missed, and by how much.
func target(name string, got, want float64, higherIsBetter bool) string {
	met := got >= want
	if !higherIsBetter {
		met = got <= want
	}
	verdict := "**met**"
	if !met {
		verdict = fmt.Sprintf("**missed** by %.0f%%", 100*abs(got-want)/want)
	}
	cmp := "≥"
	if !higherIsBetter {
		cmp = "≤"
	}
	return fmt.Sprintf("target %s: %.2f (want %s %.2f): %s", name, got, cmp, want, verdict)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func (r *run) report() string {
	var b strings.Builder
	e := r.env
	if len(r.tables) == 0 && len(r.pgTables) > 0 {
		fmt.Fprintf(&b, "Produced by `cd bench && go run ./cmd/compare %s` with TURNFRAME_PG_URL set (%s run, %v) on %s, %s logical CPUs, %s; load average start %s, end %s.\n\n",
			strings.Join(os.Args[1:], " "), r.mode(), e.Duration, e.CPU, e.Cores, e.GoVersion, e.LoadStart, e.LoadEnd)
		b.WriteString(r.plotsMarkdown())
		b.WriteString(r.pgReport())
		r.writeFailures(&b)
		return b.String()
	}
	fmt.Fprintf(&b, "# turnframe benchmark results\n\n")
	fmt.Fprintf(&b, "Produced by `cd bench && go run ./cmd/compare%s -out RESULTS.md` (%s run, %v).\n\n", map[bool]string{true: " -quick"}[r.quick], r.mode(), e.Duration)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", e.Date)
	fmt.Fprintf(&b, "| CPU | %s (%s logical CPUs) |\n", e.CPU, e.Cores)
	fmt.Fprintf(&b, "| Go | %s |\n", e.GoVersion)
	fmt.Fprintf(&b, "| SQLite | %s (modernc.org/sqlite v1.62.0, pure Go) |\n", e.SQLite)
	fmt.Fprintf(&b, "| settings | WAL; synchronous FULL and NORMAL; busy_timeout; foreign_keys on; %d-byte payloads; one fresh file per contender in a temporary folder under %s (removed after) |\n", bench.PayloadSize, filepath.Dir(r.folder.Dir))
	fmt.Fprintf(&b, "| peers | River v0.51.2 + riversqlite v0.51.2 (pool of 1 connection, %d workers, FetchCooldown 1 ms, FetchPollInterval 10 ms); goqite github.com/maragudk/goqite v0.2.3 (pool of 1 connection) |\n", bench.RiverMaxWorkers)
	fmt.Fprintf(&b, "| repetitions | %d (median reported) |\n", r.sz.Reps)
	fmt.Fprintf(&b, "| load average (1, 5, 15 min) | start %s, end %s |\n", e.LoadStart, e.LoadEnd)
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "| host | %s |\n\n", host)
	b.WriteString("The machine is shared: other builds and tests may run during a measurement, and the load average above says how busy it was. ")
	b.WriteString("Absolute figures are noise on such a machine; ratios measured in the same run, contenders interleaved, are what to read.\n\n")
	b.WriteString("## Targets (issue 7, ratios measured in this run)\n\n")
	for _, t := range r.tables {
		for _, n := range t.notes {
			if strings.HasPrefix(n, "target ") {
				fmt.Fprintf(&b, "* %s\n", strings.TrimPrefix(n, "target "))
			}
		}
	}
	b.WriteString("\n")
	b.WriteString(r.plotsMarkdown())
	b.WriteString("## Measurements\n\n")
	for _, t := range r.tables {
		b.WriteString(t.markdown())
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	b.WriteString(r.pgReport())
	b.WriteString(boundsText)
	r.writeFailures(&b)
	return b.String()
}

// writeFailures ends the report with the failed checks, or says none failed.
func (r *run) writeFailures(b *strings.Builder) {
	if len(r.failures) > 0 {
		b.WriteString("## Correctness failures\n\n")
		for _, f := range r.failures {
			fmt.Fprintf(b, "* %s\n", f)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("All correctness checks passed: every contender drained every row, and no row was sent twice by several processes.\n")
	}
}

// boundsText is what profiling found bounds the gaps. It is written by hand
// from the micro-benchmarks and pprof (see README.md for the commands), not
// measured by this run: re-profile after changing sqlitestore.
const boundsText = `## What bounds the gaps (profiled by hand, not by this run)

Profiled on 2026-11-30, after claims became leases and outbox keys unique (issues 11 and 12), with
` + "`go test -run '^$' -bench 'ApplyCommit' -benchmem -cpuprofile cpu.out`" + ` and ` + "`go tool pprof -top -cum cpu.out`" + `,
the code before and after the change profiled alike (40,000 Applies each, NORMAL); pages per transaction are WAL
frames counted with ` + "`PRAGMA wal_checkpoint`" + ` on fresh files, a count no load on the machine disturbs.

* **drain, Concurrency 1** is bound by commits: the dispatcher writes a lone settlement at once (DESIGN.md: it is
  never held back to wait for company), so the first row of a batch settles alone while the other fifteen are sent,
  and a batch costs a claim and about 1.4–2.1 settle transactions (the notes of table 2 give this run's) — 2.4 to 3.1
  commits where the ceiling makes 2. At FULL a commit is most of the cost, so this caps Concurrency 1 well below the
  ceiling before any CPU is counted.
  Closing it would mean holding the first settlement back, which the design forbids on purpose. The lease keeper
  writes nothing here: it extends leases only for a sweep that runs longer than half the lease margin (15 s by
  default), and the drain counts 0 lease-extension transactions.
* **drain, Concurrency 8** groups most of a batch (about 1.1–1.7 settle transactions per batch), so what remains is CPU in the
  store: the claim maintains more indexes and returns every column, each settlement is its own fenced UPDATE with
  index maintenance, and database/sql starts a goroutine per result set inside a transaction. A claim of 16 rows now
  writes about 6.2 pages where it wrote 4.6: each claimed row stores its lease's end, 8 more bytes, and rows packed
  in enqueue order no longer fit their leaf page, which splits (104 → 123 table pages for 1,024 claimed rows; no
  split before). The drain's ratios did not move beyond the noise.
* **enqueue-in-tx** (one Apply committing a command, as Runtime.Execute writes it) reads the turn and the entry,
  updates the entry, inserts the event and the outbox row and touches the turn (the last command of a turn also
  counts its pending entries, one row of the partial index journal_pending, for the Write's Advance), where the
  raw transaction runs two INSERTs; its commit writes about 10.5 pages against 4.3. Since the lease contract the
  UNIQUE index outbox_key adds one index entry to the INSERT and one page to each commit (9.4 → 10.5): the price
  of refusing a second row with one key.
* **turn** takes five write transactions (Receive, Plan, Execute's Executing mark, Execute's commit, Deliver).
  The Executing mark before the handler runs is what I14/I15 rest on for a command that calls out (it takes the
  entry under a lease) and must stay a transaction of its own. A command declared local (WithLocalCommand: its
  handler makes no outside call, as the bench's does) needs none, and its turn takes four: about 1.2× the turns
  per second. The other four are one per API call, each waiting for the application in a real turn (the model's
  plan, the handler, the answer), so no two can share a transaction; what remains is each Apply's own cost.
* **two processes** on one file: SQLite's busy handler polls with sleeps, so whichever process holds the write lock
  tends to win it again; the other may wait until the backlog is gone. Combined throughput is therefore about one
  process's, and the split between processes is uneven (shown in the notes). No row was ever sent twice.
* **claim at scale** stays flat with finished rows (the partial due index) and with a blocked head: rows an earlier
  row of their order key holds back are marked held and stay out of the due index until their predecessor stops
  holding the key, so a claim never reads the queue behind a blocked head.
`
