// Command compare runs turnframe, the raw SQLite ceilings and the peer
// libraries (River on SQLite, goqite) side by side in one process run and
// prints a markdown report of rows per second and ratios; given a
// PostgreSQL server (-pg or TURNFRAME_PG_URL) it also runs pgstore against
// River on riverpgxv5 on that server, and skips that part without one.
//
//	cd bench && go run ./cmd/compare [-quick] [-out RESULTS.md]
//
// Every contender runs on a fresh file in one temporary folder, in WAL mode,
// at synchronous=FULL and again at NORMAL, with 256-byte payloads and the
// same row counts; contenders are interleaved (each repetition rotates
// their order) so a burst of load on a shared machine hits all of them.
//
// It exits non-zero only when a correctness check fails (a row sent twice
// by the two-process drain, a row left undrained, a contender erroring),
// never because something was slow: CI runs it with -quick; and with 2,
// before running or writing anything, on a command line it refuses (an
// unknown -only workload or -sync setting, a negative -reps, an argument).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe/bench"
)

// sizes are the row counts of one run.
type sizes struct {
	Enqueue, Drain, Turns       int
	ScaleSmall, ScaleLarge, Due int
	Claims                      int // claims measured per scale file
	BlockedHead                 int
	RSSSmall, RSSLarge          int
	TwoProc                     int
	Latency                     int // rows of the enqueue → send latency workload
	Reps                        int // repetitions of enqueue, drain, turn; the median is reported

	// The PostgreSQL workloads (-pg): enqueue-in-tx, drain, processes
	// draining one database, and claim latency with PGDue due rows behind
	// each count of finished rows in PGScale.
	PGEnqueue, PGDrain, PGProcs, PGDue int
	PGScale                            []int
}

var (
	full = sizes{Enqueue: 20_000, Drain: 50_000, Turns: 5_000, ScaleSmall: 10_000, ScaleLarge: 1_000_000, Due: 100_000, Claims: 400, BlockedHead: 10_000, RSSSmall: 10_000, RSSLarge: 100_000, TwoProc: 50_000, Latency: 400, Reps: 1,
		PGEnqueue: 10_000, PGDrain: 20_000, PGProcs: 50_000, PGDue: 20_000, PGScale: []int{10_000, 200_000, 1_000_000}}
	quick = sizes{Enqueue: 1_000, Drain: 2_000, Turns: 200, ScaleSmall: 1_000, ScaleLarge: 20_000, Due: 2_000, Claims: 40, BlockedHead: 1_000, RSSSmall: 1_000, RSSLarge: 10_000, TwoProc: 4_000, Latency: 100, Reps: 1,
		PGEnqueue: 300, PGDrain: 1_000, PGProcs: 3_000, PGDue: 1_000, PGScale: []int{1_000, 10_000}}
)

func main() {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	var (
		quickFlag = flag.Bool("quick", false, "small row counts: under a minute, for CI; checks correctness, never speed")
		out       = flag.String("out", "", "also write the report to this file (e.g. RESULTS.md)")
		dir       = flag.String("dir", "", "folder for the temporary database folder (default: the system temp dir)")
		only      = flag.String("only", "", "comma-separated workloads to run: enqueue,drain,turn,scale,memory,twoproc,latency, and with -pg pgenqueue,pgdrain,pgprocs,pgscale (\"pg\": all four) (default all)")
		pgURL     = flag.String("pg", os.Getenv("TURNFRAME_PG_URL"), "PostgreSQL server URL (postgres://...) for the pg workloads, each contender on a fresh schema dropped after; default $TURNFRAME_PG_URL; empty skips them")
		reps      = flag.Int("reps", 0, "repetitions of enqueue, drain and turn, and of pgenqueue, pgdrain and pgprocs (median reported); 0 = the size's default")
		syncs     = flag.String("sync", "FULL,NORMAL", "synchronous settings to run")
		cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	flag.Parse()
	if err := checkFlags(flag.Args(), *only, *syncs, *reps); err != nil {
		// Before anything runs or is written: a mistyped -only ran no
		// workload and wrote a report of nothing over -out (RESULTS.md).
		fatal(err)
	}
	sz := full
	if *quickFlag {
		sz = quick
	}
	if *reps > 0 {
		sz.Reps = *reps
	}
	var settings []bench.Sync
	for _, s := range strings.Split(*syncs, ",") {
		settings = append(settings, bench.Sync(strings.ToUpper(strings.TrimSpace(s))))
	}
	want := func(w string) bool {
		ws := strings.Split(*only, ",")
		return *only == "" || slices.Contains(ws, w) || strings.HasPrefix(w, "pg") && slices.Contains(ws, "pg")
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	ctx := context.Background()
	folder, err := bench.NewFolder(*dir)
	if err != nil {
		fatal(err)
	}
	defer folder.Close()

	r := &run{ctx: ctx, folder: folder, sz: sz, syncs: settings, quick: *quickFlag, pgURL: *pgURL}
	r.env = environment(ctx, folder.Dir)
	fmt.Fprintf(os.Stderr, "compare: %s run in %s (load %s)\n", r.mode(), folder.Dir, r.env.LoadStart)
	start := time.Now()
	if want("enqueue") {
		r.enqueue()
	}
	if want("drain") {
		r.drain()
	}
	if want("turn") {
		r.turn()
	}
	if want("scale") {
		r.scale()
	}
	if want("memory") {
		r.memory()
	}
	if want("twoproc") {
		r.twoProc()
	}
	if want("latency") {
		r.latency()
	}
	r.postgres(want)
	r.env.LoadEnd = loadAvg()
	r.env.Duration = time.Since(start).Round(time.Second)

	if *out != "" {
		// The charts go in plots/ beside the report, which links them.
		if err := r.writePlots(filepath.Join(filepath.Dir(*out), "plots")); err != nil {
			fatal(err)
		}
	}
	report := r.report()
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			fatal(err)
		}
	}
	if len(r.failures) > 0 {
		fmt.Fprintf(os.Stderr, "compare: %d correctness check(s) failed:\n", len(r.failures))
		for _, f := range r.failures {
			fmt.Fprintln(os.Stderr, "  -", f)
		}
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// workloads are the names -only takes; "pg" stands for the four pg ones.
var workloads = []string{"enqueue", "drain", "turn", "scale", "memory", "twoproc", "latency",
	"pgenqueue", "pgdrain", "pgprocs", "pgscale", "pg"}

// checkFlags refuses a command line the run would misread: an argument (the
// flags take none), a workload -only does not know (it would be skipped in
// silence, and with every name mistyped nothing runs and -out is
// overwritten with an empty report), a -sync setting other than FULL and
// NORMAL (every workload ran at it anyway, turnframe's contender at FULL
// under its label, and the report went over -out), or a negative -reps.
func checkFlags(args []string, only, syncs string, reps int) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (-h lists the flags)", args[0])
	}
	if only != "" {
		for _, w := range strings.Split(only, ",") {
			if !slices.Contains(workloads, w) {
				return fmt.Errorf("-only: %q is not a workload (one of %s)", w, strings.Join(workloads, ", "))
			}
		}
	}
	for _, s := range strings.Split(syncs, ",") {
		switch bench.Sync(strings.ToUpper(strings.TrimSpace(s))) {
		case bench.SyncFull, bench.SyncNormal:
		default:
			return fmt.Errorf("-sync: %q is not FULL or NORMAL", s)
		}
	}
	if reps < 0 {
		return fmt.Errorf("-reps %d is negative (0: the size's default)", reps)
	}
	return nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(2)
}

// run is one comparison: what it measured and what failed.
type run struct {
	ctx      context.Context
	folder   *bench.Folder
	sz       sizes
	syncs    []bench.Sync
	quick    bool
	env      env
	tables   []table
	pgURL    string  // the PostgreSQL server of the pg workloads; "" skips them
	pgServer string  // its version and settings, for the report
	pgTables []table // the pg workloads' tables, reported in a section of their own
	notes    []string
	failures []string
	plots    chartData   // the figures the charts are drawn from
	charted  []chartFile // the charts written beside -out, linked from the report
}

func (r *run) mode() string {
	if r.quick {
		return "quick"
	}
	return "full"
}

// fail records a failed correctness check (the run goes on).
func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, "compare: FAIL:", msg)
	r.failures = append(r.failures, msg)
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
}

// env is the machine and software the run measured on.
type env struct {
	Date, CPU, Cores, GoVersion, SQLite, Dir string
	LoadStart, LoadEnd                       string
	Duration                                 time.Duration
}

func environment(ctx context.Context, dir string) env {
	e := env{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), GoVersion: runtime.Version(), Dir: dir, LoadStart: loadAvg()}
	e.CPU, e.Cores = cpuInfo()
	v, err := bench.SQLiteVersion(ctx)
	if err != nil {
		v = "unknown: " + err.Error()
	}
	e.SQLite = v
	return e
}

func cpuInfo() (model, cores string) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown", "?"
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			model = strings.TrimSpace(v)
		case "processor":
			n++
		}
	}
	return model, fmt.Sprint(n)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func contextBackground() context.Context { return context.Background() }
