package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
)

// The child kinds of the PostgreSQL processes workload: childPath holds
// the schema's URL.
const (
	childPGDrain    = "pgdrain"    // pgstore, RunOnce until a sweep claims nothing
	childRiverDrain = "riverdrain" // River, until no job is left unfinished
)

// pgProcWorkers is each child's concurrency: pgstore's Concurrency and
// River's MaxWorkers.
const pgProcWorkers = 8

// riverPollEvery is how often a River child asks whether any job is left
// unfinished (one indexed EXISTS): River has no "queue empty" signal, and
// its end time is its last completion event, not this poll.
const riverPollEvery = 20 * time.Millisecond

// awaitGo says "ready" and waits for the parent's go-ahead line.
func awaitGo() error {
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n')
	return err
}

// idRecorder collects the ids a child's sender or worker was handed.
type idRecorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *idRecorder) add(id string) {
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
}

// write puts the ids, one a line, in the file named by childIDs.
func (r *idRecorder) write() error {
	p := os.Getenv(childIDs)
	if p == "" {
		return nil
	}
	var b bytes.Buffer
	for _, id := range r.ids {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	return os.WriteFile(p, b.Bytes(), 0o644)
}

// childPGStoreDrain drains the schema with one pgstore dispatcher.
func childPGStoreDrain() (res childResult) {
	ctx := contextBackground()
	st, err := bench.OpenPGStore(ctx, &bench.PGSchema{URL: os.Getenv(childPath)})
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer st.Close()
	rec := &idRecorder{}
	sender := &bench.NoopSender{Record: func(id turnframe.OutboxID) { rec.add(id.String()) }}
	d := bench.NewDispatcher(st, sender, os.Getenv(childWorker), pgProcWorkers)
	if err := awaitGo(); err != nil {
		res.Error = "waiting for go: " + err.Error()
		return res
	}
	res.Start = time.Now().UnixNano()
	res.Drained, err = bench.DrainDispatcher(ctx, d, 0)
	res.End = time.Now().UnixNano()
	if err == nil {
		err = rec.write()
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// childRiverPGDrain works the schema's jobs with one River client until no
// job is left unfinished; its end is the time of its last completion event.
func childRiverPGDrain() (res childResult) {
	ctx, cancel := context.WithTimeout(contextBackground(), drainTimeout)
	defer cancel()
	rec := &idRecorder{}
	rv, err := bench.OpenRiverPG(ctx, &bench.PGSchema{URL: os.Getenv(childPath)}, pgProcWorkers,
		func(id int64) { rec.add(strconv.FormatInt(id, 10)) })
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer rv.Close()
	events, unsubscribe := rv.Client.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
		ChanSize: 1 << 20,
	})
	defer unsubscribe()
	if err := awaitGo(); err != nil {
		res.Error = "waiting for go: " + err.Error()
		return res
	}
	res.Start = time.Now().UnixNano()
	res.End = res.Start
	if err := rv.Client.Start(ctx); err != nil {
		res.Error = err.Error()
		return res
	}
	err = riverUntilEmpty(ctx, rv, events, &res)
	sctx, scancel := context.WithTimeout(contextBackground(), 30*time.Second)
	defer scancel()
	if serr := rv.Client.Stop(sctx); err == nil {
		err = serr
	}
	for len(events) > 0 { // completions reported while stopping
		if err == nil {
			err = countRiverEvent(<-events, &res)
		} else {
			<-events
		}
	}
	if err == nil {
		err = rec.write()
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// riverUntilEmpty counts completion events until a poll finds no job left
// unfinished in the schema.
func riverUntilEmpty(ctx context.Context, rv *bench.RiverPG, events <-chan *river.Event, res *childResult) error {
	tick := time.NewTicker(riverPollEvery)
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			if err := countRiverEvent(ev, res); err != nil {
				return err
			}
		case <-tick.C:
			left, err := bench.RiverPGLeft(ctx, rv.Pool)
			if err != nil {
				return err
			}
			if left == 0 {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("river child: %d completed: %w", res.Drained, ctx.Err())
		}
	}
}

func countRiverEvent(ev *river.Event, res *childResult) error {
	if ev.Kind != river.EventKindJobCompleted {
		return fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
	}
	res.Drained++
	res.End = time.Now().UnixNano()
	return nil
}

// pgProcs: 1 and 3 processes draining one schema, pgstore and River; no
// row may be sent (no job worked) twice.
func (r *run) pgProcs() {
	n := r.sz.PGProcs
	t := table{title: fmt.Sprintf("P4. processes draining one PostgreSQL database (N = %d)", n),
		intro: fmt.Sprintf("Child processes (the compare binary re-run), each with its own pool of %d connections: pgstore, one dispatcher at Concurrency %d with its own worker id, `RunOnce` until a sweep claims nothing; "+
			"River, one client with `MaxWorkers` %d (FetchCooldown 1 ms, FetchPollInterval 10 ms) until a poll every %v finds no job unfinished. "+
			"Each child records every id its sender (worker) was handed; the parent checks that none was handed twice, that every one was, and that every row is Completed (every River job completed at its first attempt). "+
			"Rate = rows ÷ (last child's last completion − first child's start). Median of %d runs, contenders alternating.",
			bench.PGPoolConns, pgProcWorkers, pgProcWorkers, riverPollEvery, r.sz.Reps),
		header: []string{"contender", "1 process rows/s", "3 processes rows/s", "3 ÷ 1", "rows sent twice", "rows never sent", "split of the 3 (median run)"}}
	type key struct {
		kind  string
		procs int
	}
	runs := map[key][]procRun{}
	kinds := []string{childPGDrain, childRiverDrain}
	for rep := range r.sz.Reps {
		for _, procs := range []int{1, 3} {
			for j := range kinds {
				kind := kinds[(j+rep)%len(kinds)]
				pr, err := r.pgDrainProcs(kind, n, procs)
				if err != nil {
					r.fail("pgprocs %s, %d processes: %v", kind, procs, err)
					continue
				}
				runs[key{kind, procs}] = append(runs[key{kind, procs}], pr)
			}
		}
	}
	median := func(k key) (procRun, bool) {
		rs := runs[k]
		if len(rs) == 0 {
			return procRun{}, false
		}
		slices.SortFunc(rs, func(a, b procRun) int { return cmpF(a.rate, b.rate) })
		return rs[len(rs)/2], true
	}
	rates := map[string]float64{}
	for _, kind := range kinds {
		name := map[string]string{childPGDrain: "pgstore RunOnce c=8", childRiverDrain: "River 8 workers"}[kind]
		one, ok1 := median(key{kind, 1})
		three, ok3 := median(key{kind, 3})
		if !ok1 || !ok3 {
			t.rows = append(t.rows, []string{name, "failed", "failed", "", "", "", ""})
			continue
		}
		dups, missing := 0, 0
		for _, pr := range append(runs[key{kind, 1}], runs[key{kind, 3}]...) {
			dups += pr.dups
			missing += pr.missing
		}
		rates[kind] = three.rate
		t.rows = append(t.rows, []string{name, fmt.Sprintf("%.0f", one.rate), fmt.Sprintf("%.0f", three.rate),
			fmt.Sprintf("%.2f", three.rate/one.rate), strconv.Itoa(dups), strconv.Itoa(missing), strings.Join(three.split, " + ")})
	}
	if a, b := rates[childPGDrain], rates[childRiverDrain]; a > 0 && b > 0 {
		t.notes = append(t.notes, target("PostgreSQL, 3 processes: pgstore ÷ River", a/b, 1, true))
	}
	t.notes = append(t.notes, "Rows sent twice and never sent are summed over every run of the row's contender, 1 and 3 processes.")
	r.pgTables = append(r.pgTables, t)
}

// pgDrainProcs seeds a fresh schema with n rows (jobs) for kind and drains
// it with procs child processes at once.
func (r *run) pgDrainProcs(kind string, n, procs int) (procRun, error) {
	var pr procRun
	ctx := r.ctx
	s, err := bench.NewPGSchema(ctx, r.pgURL)
	if err != nil {
		return pr, err
	}
	defer func() {
		if err := s.Drop(ctx); err != nil {
			r.fail("drop schema %s: %v", s.Name, err)
		}
	}()
	check, err := r.seedProcs(kind, s, n)
	if err != nil {
		return pr, err
	}
	kids := make([]*proc, procs)
	idFiles := make([]string, procs)
	for i := range kids {
		idFiles[i] = fmt.Sprintf("%s/%s-ids-%d", r.folder.Dir, s.Name, i)
		defer os.Remove(idFiles[i])
		p, err := startChildKind(kind, s.URL, "", fmt.Sprintf("proc-%d", i), idFiles[i], pgProcWorkers)
		if err != nil {
			return pr, err
		}
		kids[i] = p
	}
	for _, k := range kids {
		if err := k.goAhead(); err != nil {
			return pr, err
		}
	}
	seen := map[string]int{}
	var first, last int64
	var werr error
	for i, k := range kids {
		res, err := k.wait()
		if err != nil {
			werr = err
			continue
		}
		if i == 0 || res.Start < first {
			first = res.Start
		}
		last = max(last, res.End)
		b, err := os.ReadFile(idFiles[i])
		if err != nil {
			return pr, err
		}
		ids := strings.Fields(string(b))
		for _, id := range ids {
			seen[id]++
		}
		pr.split = append(pr.split, strconv.Itoa(len(ids)))
	}
	if werr != nil {
		return pr, werr
	}
	for _, c := range seen {
		pr.dups += max(0, c-1)
	}
	pr.missing = n - len(seen)
	pr.rate = float64(n) / (float64(last-first) / 1e9)
	cerr := check()
	r.logf("pgprocs  %-10s %d proc: %.0f rows/s, sent %v, %d dup, %d missing (check: %v)", kind, procs, pr.rate, pr.split, pr.dups, pr.missing, cerr)
	if pr.dups != 0 || pr.missing != 0 || cerr != nil {
		r.fail("pgprocs %s, %d processes: %d sent twice, %d never sent, final state: %v", kind, procs, pr.dups, pr.missing, cerr)
	}
	return pr, nil
}

// seedProcs puts n due rows (jobs) for kind into the schema, untimed, and
// returns the check of the final state: every row Completed (every job
// completed at its first attempt).
func (r *run) seedProcs(kind string, s *bench.PGSchema, n int) (check func() error, err error) {
	ctx := r.ctx
	switch kind {
	case childPGDrain:
		st, err := bench.OpenPGStore(ctx, s)
		if err != nil {
			return nil, err
		}
		if err := bench.SeedPG(ctx, st.Pool(), bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)}); err != nil {
			st.Close()
			return nil, err
		}
		st.Close()
		return func() error {
			st, err := bench.OpenPGStore(ctx, s)
			if err != nil {
				return err
			}
			defer st.Close()
			return checkCountPG(st, "completed", n)
		}, nil
	case childRiverDrain:
		if err := bench.MigrateRiverPG(ctx, s); err != nil {
			return nil, err
		}
		rv, err := bench.OpenRiverPG(ctx, s, 0, nil)
		if err != nil {
			return nil, err
		}
		defer rv.Close()
		if err := rv.Seed(ctx, n); err != nil {
			return nil, err
		}
		return func() error {
			rv, err := bench.OpenRiverPG(ctx, s, 0, nil)
			if err != nil {
				return err
			}
			defer rv.Close()
			return bench.CheckRiverPG(ctx, rv.Pool, n)
		}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}
