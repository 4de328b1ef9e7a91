package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe/bench"
)

// contender is one thing measured in a workload: it builds its fixture on a
// fresh file at path (untimed), runs n rows or turns and says how long that
// took.
type contender struct {
	name string
	run  func(path string, s bench.Sync, n int) (bench.Measure, error)
}

type cell struct {
	contender string
	sync      bench.Sync
}

// measureAll runs every contender at every setting, reps times, rotating
// the order each repetition, and returns the median measure of each. A
// contender that fails is recorded as a failure and left out.
func (r *run) measureAll(workload string, n int, cs []contender) map[cell]bench.Measure {
	got := map[cell][]bench.Measure{}
	for rep := range r.sz.Reps {
		for _, s := range r.syncs {
			for i := range cs {
				c := cs[(i+rep)%len(cs)]
				path := r.folder.File(workload)
				m, err := c.run(path, s, n)
				bench.Remove(path)
				if err != nil {
					r.fail("%s / %s / %s: %v", workload, c.name, s, err)
					continue
				}
				r.logf("%-8s %-28s %-6s %9.0f /s  (%d in %v)", workload, c.name, s, m.PerSecond(), m.N, m.Elapsed.Round(time.Millisecond))
				got[cell{c.name, s}] = append(got[cell{c.name, s}], m)
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
	fmt.Fprintf(&b, "# turnframe benchmark results\n\n")
	fmt.Fprintf(&b, "Produced by `cd bench && go run ./cmd/compare%s -out RESULTS.md` (%s run, %v).\n\n", map[bool]string{true: " -quick"}[r.quick], r.mode(), e.Duration)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", e.Date)
	fmt.Fprintf(&b, "| CPU | %s (%s logical CPUs) |\n", e.CPU, e.Cores)
	fmt.Fprintf(&b, "| Go | %s |\n", e.GoVersion)
	fmt.Fprintf(&b, "| SQLite | %s (modernc.org/sqlite v1.62.0, pure Go) |\n", e.SQLite)
	fmt.Fprintf(&b, "| settings | WAL; synchronous FULL and NORMAL; busy_timeout; foreign_keys on; %d-byte payloads; one fresh file per contender in %s |\n", bench.PayloadSize, r.folder.Dir)
	fmt.Fprintf(&b, "| peers | River v0.51.2 + riversqlite v0.51.2 (pool of 1 connection, %d workers, FetchCooldown 1 ms, FetchPollInterval 10 ms); goqite github.com/maragudk/goqite v0.2.3 (pool of 1 connection) |\n", bench.RiverMaxWorkers)
	fmt.Fprintf(&b, "| repetitions | %d (median reported) |\n", r.sz.Reps)
	fmt.Fprintf(&b, "| load average (1, 5, 15 min) | start %s, end %s |\n", e.LoadStart, e.LoadEnd)
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "| host | %s |\n\n", host)
	b.WriteString("The machine is shared: other builds and tests may run during a measurement, and the load average above says how busy it was. ")
	b.WriteString("Absolute figures are noise on such a machine; ratios measured in the same run, contenders interleaved, are what to read.\n\n")
	for _, t := range r.tables {
		b.WriteString(t.markdown())
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	if len(r.failures) > 0 {
		b.WriteString("## Correctness failures\n\n")
		for _, f := range r.failures {
			fmt.Fprintf(&b, "* %s\n", f)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("All correctness checks passed: every contender drained every row, and the two-process drain sent no row twice.\n")
	}
	return b.String()
}
