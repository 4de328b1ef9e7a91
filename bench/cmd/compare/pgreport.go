package main

import (
	"fmt"
	"strings"

	"github.com/turnframe/turnframe/bench"
)

// postgres runs the PostgreSQL workloads want selects, or says why they
// were skipped: without a server URL (-pg or TURNFRAME_PG_URL) the run
// needs no PostgreSQL at all.
func (r *run) postgres(want func(string) bool) {
	names := []string{"pgenqueue", "pgdrain", "pgscale", "pgprocs"}
	any := false
	for _, w := range names {
		any = any || want(w)
	}
	if !any {
		return
	}
	if r.pgURL == "" {
		msg := "PostgreSQL workloads skipped: no server URL. Set -pg or TURNFRAME_PG_URL (a local server: export TURNFRAME_PG_URL=$(sudo scripts/pg-start.sh))."
		r.logf("%s", msg)
		r.notes = append(r.notes, msg)
		return
	}
	info, err := bench.PGServerInfo(r.ctx, r.pgURL)
	if err != nil {
		r.fail("postgres: %v", err)
		return
	}
	r.pgServer = info
	r.logf("postgres %s", info)
	steps := map[string]func(){"pgenqueue": r.pgEnqueue, "pgdrain": r.pgDrain, "pgprocs": r.pgProcs, "pgscale": r.pgScale}
	for _, w := range names {
		if want(w) {
			steps[w]()
		}
	}
}

// pgReport is the section of the report the PostgreSQL workloads fill.
func (r *run) pgReport() string {
	if len(r.pgTables) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## PostgreSQL: pgstore and River\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| server | %s, local, Unix socket |\n", r.pgServer)
	fmt.Fprintf(&b, "| contenders | pgstore (this repository, pgx v5.12.0) and River v0.51.2 + riverpgxv5 v0.51.2; each on a fresh schema of one database, dropped after; every pool (pgxpool) %d connections |\n", bench.PGPoolConns)
	fmt.Fprintf(&b, "| repetitions | %d (median reported) |\n\n", r.sz.Reps)
	b.WriteString("### Targets (issue 16, ratios measured in this run)\n\n")
	for _, t := range r.pgTables {
		for _, n := range t.notes {
			if strings.HasPrefix(n, "target ") {
				fmt.Fprintf(&b, "* %s\n", strings.TrimPrefix(n, "target "))
			}
		}
	}
	b.WriteString("\n")
	for _, t := range r.pgTables {
		b.WriteString(t.markdown())
	}
	return b.String()
}
