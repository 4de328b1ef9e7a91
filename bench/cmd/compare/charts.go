package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe/bench"
	"github.com/turnframe/turnframe/bench/cmd/compare/svgchart"
)

// chartData is what the charts are drawn from: the figures the workloads
// measured, in the order they measured them. A workload that did not run
// adds nothing, and a chart without figures is not written.
type chartData struct {
	rates  []rateFigure
	claims []claimFigure
}

// rateFigure is one contender's median rate at one setting.
type rateFigure struct {
	workload  string // "enqueue", "pgenqueue", "drain", "pgdrain"
	contender string
	sync      bench.Sync
	perSecond float64
}

// claimFigure is the claim latency of one file (or schema) at one setting.
type claimFigure struct {
	store       string // "sqlitestore" or "pgstore"
	sync        bench.Sync
	finished    int
	median, p90 time.Duration
}

// addRates keeps the medians of a rate workload, contenders in cs's order.
func (d *chartData) addRates(workload string, cs []contender, syncs []bench.Sync, med map[cell]bench.Measure) {
	for _, c := range cs {
		for _, s := range syncs {
			if m, ok := med[cell{c.name, s}]; ok {
				d.rates = append(d.rates, rateFigure{workload, c.name, s, m.PerSecond()})
			}
		}
	}
}

// addClaims keeps the claim latencies of a file holding finished rows.
func (d *chartData) addClaims(store string, finished int, f *scaleFile, syncs []bench.Sync) {
	for _, s := range syncs {
		if len(f.lat[s]) > 0 {
			d.claims = append(d.claims, claimFigure{store, s, finished, quantile(f.lat[s], 0.5), quantile(f.lat[s], 0.9)})
		}
	}
}

// chartFile is one chart of the report: its file name under plots/ and
// the SVG.
type chartFile struct {
	name, alt string
	svg       []byte
}

// charts draws the charts the run has figures for.
func (r *run) charts() []chartFile {
	var out []chartFile
	// sizes says the N of each half of a rate chart that has figures.
	sizes := func(sqlite string, sqliteN int, pg string, pgN int) string {
		var parts []string
		if r.hasRates(sqlite) {
			parts = append(parts, fmt.Sprintf("SQLite N = %d", sqliteN))
		}
		if r.hasRates(pg) {
			parts = append(parts, fmt.Sprintf("PostgreSQL N = %d", pgN))
		}
		return strings.Join(parts, ", ")
	}
	if r.hasRates("drain", "pgdrain") {
		out = append(out, chartFile{"drain.svg", "drain: rows/s per contender, FULL and NORMAL", r.rateChart(
			"Drain: rows per second until the queue is empty",
			fmt.Sprintf("%s due rows, no-op sender; median of %d, %s run. Higher is better.", sizes("drain", r.sz.Drain, "pgdrain", r.sz.PGDrain), r.sz.Reps, r.mode()),
			"drain", "pgdrain")})
	}
	if r.hasRates("enqueue", "pgenqueue") {
		out = append(out, chartFile{"enqueue.svg", "enqueue-in-tx: rows/s per contender", r.rateChart(
			"Enqueue-in-tx: rows per second (one application row + one message per transaction)",
			fmt.Sprintf("%s; median of %d, %s run. Higher is better.", sizes("enqueue", r.sz.Enqueue, "pgenqueue", r.sz.PGEnqueue), r.sz.Reps, r.mode()),
			"enqueue", "pgenqueue")})
	}
	if len(r.plots.claims) > 0 {
		out = append(out, chartFile{"claim-latency.svg", "claim latency against finished rows", r.claimChart()})
	}
	return out
}

// hasRates reports whether any of the workloads left a figure.
func (r *run) hasRates(workloads ...string) bool {
	return slices.ContainsFunc(r.plots.rates, func(f rateFigure) bool { return slices.Contains(workloads, f.workload) })
}

// syncLabel names a setting in a chart's legend.
func syncLabel(s bench.Sync) string {
	if s == pgSync {
		return "PostgreSQL (fsync, synchronous_commit on)"
	}
	return "SQLite synchronous=" + string(s)
}

// syncColor gives each setting one color in every chart.
func syncColor(s bench.Sync) int {
	switch s {
	case bench.SyncFull:
		return 0
	case bench.SyncNormal:
		return 1
	case pgSync:
		return 2
	}
	return 3
}

// rateChart is a grouped bar chart of the workloads' rates: a band per
// contender, a bar per setting.
func (r *run) rateChart(title, subtitle string, workloads ...string) []byte {
	var cats []string
	var syncs []bench.Sync
	for _, f := range r.plots.rates {
		if slices.Contains(workloads, f.workload) {
			if !slices.Contains(cats, f.contender) {
				cats = append(cats, f.contender)
			}
			if !slices.Contains(syncs, f.sync) {
				syncs = append(syncs, f.sync)
			}
		}
	}
	slices.SortStableFunc(syncs, func(a, b bench.Sync) int { return syncColor(a) - syncColor(b) })
	chart := svgchart.Bars{Title: title, Subtitle: subtitle, Unit: "rows per second", Categories: cats}
	for _, s := range syncs {
		vals := make([]float64, len(cats))
		for i := range vals {
			vals[i] = -1 // missing
		}
		for _, f := range r.plots.rates {
			if f.sync == s && slices.Contains(workloads, f.workload) {
				vals[slices.Index(cats, f.contender)] = f.perSecond
			}
		}
		for len(chart.Series) < syncColor(s) { // keep each setting's color
			chart.Series = append(chart.Series, svgchart.Series{})
		}
		chart.Series = append(chart.Series, svgchart.Series{Name: syncLabel(s), Values: vals})
	}
	return chart.SVG()
}

// claimChart draws claim latency (median solid, p90 dashed) against
// finished rows, a pair of lines per store and setting.
func (r *run) claimChart() []byte {
	type key struct {
		store string
		sync  bench.Sync
	}
	var keys []key
	for _, f := range r.plots.claims {
		if k := (key{f.store, f.sync}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	chart := svgchart.Lines{
		Title: "Claim latency against finished rows",
		Subtitle: fmt.Sprintf("One ClaimDue of 16 rows, commit included, %d claims per file (schema) and setting; %s run. Solid: median, dashed: p90. Flat is the goal.",
			r.sz.Claims, r.mode()),
		XLabel: "finished rows in the table (log scale)",
		YLabel: "milliseconds per claim",
		LogX:   true,
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, k := range keys {
		name := k.store + " " + string(k.sync)
		if k.sync == pgSync {
			name = k.store
		}
		var med, p90 []svgchart.Point
		for _, f := range r.plots.claims {
			if f.store == k.store && f.sync == k.sync {
				med = append(med, svgchart.Point{X: float64(f.finished), Y: ms(f.median)})
				p90 = append(p90, svgchart.Point{X: float64(f.finished), Y: ms(f.p90)})
			}
		}
		chart.Lines = append(chart.Lines,
			svgchart.Line{Name: name + " median", Color: syncColor(k.sync), Points: med},
			svgchart.Line{Name: name + " p90", Color: syncColor(k.sync), Dashed: true, Points: p90})
	}
	return chart.SVG()
}

// writePlots writes the charts the run has figures for into dir and
// remembers them for the report's links. It writes nothing, not even the
// folder, when there is no chart.
func (r *run) writePlots(dir string) error {
	cs := r.charts()
	if len(cs) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range cs {
		if err := os.WriteFile(filepath.Join(dir, c.name), c.svg, 0o644); err != nil {
			return err
		}
	}
	r.charted = cs
	return nil
}

// plotsMarkdown is the report's section linking the written charts, ""
// when none was written.
func (r *run) plotsMarkdown() string {
	if len(r.charted) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Charts\n\nDrawn by this run from the tables below (files in `plots/`).\n\n")
	for _, c := range r.charted {
		fmt.Fprintf(&b, "![%s](plots/%s)\n\n", c.alt, c.name)
	}
	return b.String()
}
