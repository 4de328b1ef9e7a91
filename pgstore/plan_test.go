package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// planNode is one node of EXPLAIN (FORMAT JSON)'s plan tree.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Parent   string     `json:"Parent Relationship"`
	Subplan  string     `json:"Subplan Name"`
	Loops    float64    `json:"Actual Loops"`
	Rows     float64    `json:"Actual Rows"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Plans    []planNode `json:"Plans"`
}

// walk calls f on n and every node below it.
func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// explainClaim runs the claim statement under EXPLAIN ANALYZE in a
// transaction it rolls back, and returns the plan's root.
func explainClaim(t *testing.T, s *pgstore.Store, now int64, limit int) planNode {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx)
	var out []byte
	err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+pgstore.ClaimSQL, "w", now, limit, now+10_000_000).Scan(&out)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("read the plan (%v): %s", err, out)
	}
	return plans[0].Plan
}

// fillOutbox writes finished rows, the history a claim must not read, and
// a few due rows, some of them behind an ordered head, straight into the
// store's tables, and analyses them.
func fillOutbox(t *testing.T, s *pgstore.Store, finished, due int) {
	t.Helper()
	ctx := context.Background()
	stmts := []string{
		`INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
			VALUES ('01JBZZZZZZZZZZZZZZZZZZZZZZ', 'acme', '01JBZZZZZZZZZZZZZZZZZZZZZZ', '', 'delivered', 1, 1)`,
		fmt.Sprintf(`INSERT INTO outbox (id, account, turn, key, destination, order_key, status, attempts, due_at,
				claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
			SELECT lpad(i::text, 26, '0'), 'acme', '01JBZZZZZZZZZZZZZZZZZZZZZZ', 'k' || i, 'payments',
				CASE WHEN i %% 3 = 0 THEN 'card' ELSE '' END, 'completed', 1, i, 'w', i, '', '', i, i, i
			FROM generate_series(1, %d) AS i`, finished),
		fmt.Sprintf(`INSERT INTO outbox (id, account, turn, key, destination, order_key, status, attempts, due_at,
				claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
			SELECT lpad(i::text, 26, '0'), 'acme', '01JBZZZZZZZZZZZZZZZZZZZZZZ', 'k' || i, 'payments',
				CASE WHEN i %% 2 = 0 THEN 'card' ELSE '' END, 'pending', 0, i, '', 0, '', '', i, i, 0
			FROM generate_series(%d, %d) AS i`, finished+1, finished+due),
		`ANALYZE turns, outbox`,
	}
	for _, q := range stmts {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("fill: %v\n%s", err, q)
		}
	}
}

// The claim reads due rows by index, never the finished ones, and its
// LIMIT runs once, in the CTE, before the UPDATE: whatever the number of
// finished rows.
func TestClaimPlan(t *testing.T) {
	for _, finished := range []int{1_000, 20_000} {
		t.Run(fmt.Sprintf("%dFinishedRows", finished), func(t *testing.T) {
			is := is.New(t)
			s := mustOpen(t)
			const due, limit = 40, 16
			fillOutbox(t, s, finished, due)
			plan := explainClaim(t, s, int64(finished+due+1), limit)

			var limits, dueScans int
			var claimed float64
			plan.walk(func(n planNode) {
				if n.Relation == "outbox" && (n.Type == "Seq Scan" || n.Type == "Bitmap Heap Scan") {
					t.Errorf("the claim scans outbox: %s", n.Type)
				}
				if n.Index == "outbox_due" {
					dueScans++
				}
				if n.Type == "Limit" {
					limits++
					is.Equal(n.Loops, float64(1)) // the LIMIT runs once
					claimed = n.Rows
				}
			})
			is.Equal(limits, 1)                        // one LIMIT, in the CTE
			is.True(dueScans >= 1)                     // due rows are found through outbox_due
			is.Equal(claimed, float64(limit))          // and it stops at limit rows
			is.Equal(plan.Type, "ModifyTable")         // the UPDATE
			is.True(len(plan.Plans) > 0)               // over the CTE
			is.Equal(plan.Plans[0].Subplan, "CTE due") // which is materialised once
		})
	}
}

// fillUnfinished writes n unfinished turns of each kind the listing's
// parts find, straight into the store's tables, and analyses them:
// planned turns, then delivered turns holding an outcome_unknown, a
// pending and an awaiting_approval entry, in id order.
func fillUnfinished(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	turns := func(from int, phase string) string {
		return fmt.Sprintf(`INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
			SELECT lpad(i::text, 26, '0'), 'acme', lpad(i::text, 26, '0'), '', '%s', i, i
			FROM generate_series(%d, %d) AS i`, phase, from, from+n-1)
	}
	entries := func(from int, status string) string {
		return fmt.Sprintf(`INSERT INTO journal (account, key, turn, case_key, name, status, attempt, attempts,
				event_ids, code, remote_ref, admitted_at, updated_at)
			SELECT 'acme', 'k' || i, lpad(i::text, 26, '0'), 'c', 'n', '%s', '', 0, '{}', '', '', i, i
			FROM generate_series(%d, %d) AS i`, status, from, from+n-1)
	}
	stmts := []string{
		turns(1, "planned"),
		turns(n+1, "delivered"), entries(n+1, "outcome_unknown"),
		turns(2*n+1, "delivered"), entries(2*n+1, "pending"),
		turns(3*n+1, "delivered"), entries(3*n+1, "awaiting_approval"),
		`ANALYZE turns, journal`,
	}
	for _, q := range stmts {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("fill: %v\n%s", err, q)
		}
	}
}

// A page of unfinished turns reads its page: each part of the listing
// walks its partial index from the cursor and stops at the limit, with the
// scope's account and cut-off applied as it walks, so no part reads more
// than the limit of turns whatever follows the page (DESIGN.md, Recovery);
// and the facts each listed turn is checked against are probed per turn,
// never read whole for the page.
func TestUnfinishedPlan(t *testing.T) {
	const n, limit = 2_000, 10
	s := mustOpen(t)
	fillUnfinished(t, s, n)
	for _, tc := range []struct {
		name   string
		cursor string
		args   []any
	}{
		{"EveryAccount", "", []any{"", int64(0)}},
		{"OneAccountUnderACutOff", "", []any{"acme", int64(10 * n)}},
		{"AfterACursor", fmt.Sprintf("%026d", n/2), []any{"acme", int64(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var out []byte
			args := append([]any{tc.cursor, limit}, tc.args...)
			err := s.Pool().QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+pgstore.UnfinishedSQL, args...).Scan(&out)
			is.NoErr(err) // explain
			var plans []struct {
				Plan planNode `json:"Plan"`
			}
			is.NoErr(json.Unmarshal(out, &plans)) // read the plan
			parts := map[string]bool{}
			plans[0].Plan.walk(func(n planNode) {
				if (n.Relation == "turns" || n.Relation == "journal") && (n.Type == "Seq Scan" || n.Type == "Bitmap Heap Scan") {
					t.Errorf("the listing scans %s: %s", n.Relation, n.Type)
				}
				if (n.Relation == "turns" || n.Relation == "journal") && n.Rows*n.Loops > 4*limit {
					// a part reads at most limit; a fact is one probe per listed turn
					t.Errorf("%s (%s %s) read %v rows for a page of %d", n.Relation, n.Type, n.Index, n.Rows*n.Loops, limit)
				}
				switch n.Index {
				case "turns_unfinished", "journal_unknown", "journal_pending", "journal_awaiting":
					if n.Loops == 1 { // a part's walk, not an EXISTS probe per listed turn
						parts[n.Index] = true
						if n.Rows > limit {
							t.Errorf("%s: a part read %v entries for a page of %d", n.Index, n.Rows, limit)
						}
					}
				}
			})
			is.Equal(len(parts), 4) // every part walks its partial index
		})
	}
}

var listingIDs = turnframe.NewIDGenerator()

// explainListing runs ListOutbox's statement for filter under EXPLAIN
// ANALYZE, and returns every node of its plan. generic plans it as a
// prepared statement's generic plan, the one PostgreSQL may keep for pgx's
// cached statement after a few runs: it cannot see the bound values.
func explainListing(t *testing.T, s *pgstore.Store, filter turnframe.OutboxFilter, generic bool) []planNode {
	t.Helper()
	ctx := context.Background()
	query, args := pgstore.ListOutboxSQL(filter, 1)
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	var out []byte
	if generic {
		// EXECUTE takes its arguments as literals: ints and plain words.
		lits := make([]string, len(args))
		for i, a := range args {
			if str, ok := a.(string); ok {
				lits[i] = "'" + str + "'"
			} else {
				lits[i] = fmt.Sprint(a)
			}
		}
		// The pool's other statements stay: pgx caches them on the
		// connection, under names of its own.
		for _, q := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE test_listing AS " + query} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		defer func() {
			for _, q := range []string{"DEALLOCATE test_listing", "RESET plan_cache_mode"} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}()
		err = conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE test_listing("+strings.Join(lits, ", ")+")").Scan(&out)
	} else {
		err = conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&out)
	}
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("read the plan (%v): %s", err, out)
	}
	var nodes []planNode
	plans[0].Plan.walk(func(n planNode) { nodes = append(nodes, n) })
	return nodes
}

// Dispatcher.Run's release (every PollInterval) and every Recover list the
// OutcomeUnknown rows, and Recover the NeedsIntervention ones of its
// scope. DESIGN promises that a claim's cost does not grow with finished
// rows, and this listing runs beside every claim: it reads its status's
// partial index (outbox_unknown, outbox_intervention), never a finished
// row, in the generic plan too (the status is a literal). The unknown rows'
// listing, the one Run makes, does so before the table was ever analysed;
// without statistics, an account's listing may also read outbox_key's
// entries of the account (a BitmapAnd), so that one is checked once
// analysed, as autovacuum leaves a table that has grown.
func TestPGListingUncertainRowsDoesNotReadTheFinishedRows(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	finishedRows(t, s, t0, 2000, 10, func(int) time.Time { return t0.Add(3 * time.Second) })
	after := listingIDs.OutboxID(t0) // any id: the statement reads only that one is set
	tests := []struct {
		name   string
		filter turnframe.OutboxFilter
		index  string
	}{
		{"Unknown", turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 256}, "outbox_unknown"},
		{"UnknownAfterARow", turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 256, After: after}, "outbox_unknown"},
		{"InterventionOfAnAccount", turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "acme", Limit: turnframe.MaxLimit}, "outbox_intervention"},
	}
	check := func(t *testing.T, filter turnframe.OutboxFilter, index string, generic bool) {
		is := is.New(t)
		var indexed int
		for _, n := range explainListing(t, s, filter, generic) {
			t.Logf("%s %s %s removed=%v", n.Type, n.Relation, n.Index, n.Removed)
			if n.Index != "" { // an Index Scan, or a Bitmap Index Scan under a Bitmap Heap Scan
				is.Equal(n.Index, index) // outbox is read through its status's index only
				indexed++
			}
			if n.Relation == "outbox" {
				is.True(n.Type != "Seq Scan") // never the whole table
				is.Equal(n.Removed, 0.0)      // no finished row is read to be filtered out
			}
		}
		is.True(indexed > 0) // the index is read
	}
	for _, tc := range tests[:2] {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("Unanalysed/%s/generic=%v", tc.name, generic), func(t *testing.T) { check(t, tc.filter, tc.index, generic) })
		}
	}
	if _, err := s.Pool().Exec(context.Background(), "ANALYZE outbox"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("Analysed/%s/generic=%v", tc.name, generic), func(t *testing.T) { check(t, tc.filter, tc.index, generic) })
		}
	}
}
