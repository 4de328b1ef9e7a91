package sqlitestore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// queryPlan returns the EXPLAIN QUERY PLAN lines of query, one per step.
func queryPlan(t *testing.T, s *sqlitestore.Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.ReadDB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// The hot queries read partial indexes only: their cost follows the rows
// that are due, dispatching, finished or unfinished, never the history.
func TestQueryPlans(t *testing.T) {
	s := mustOpen(t)
	// Some history, so the planner has statistics-free but real tables.
	for i := range 20 {
		mustCommit(t, s, "acme", turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)),
			turnframe.OutboxMessage{Destination: "payments", OrderKey: "card"})
	}
	list := func(f turnframe.OutboxFilter) (string, []any) { return sqlitestore.ListOutboxSQL(f, 1) }
	unknownSQL, unknownArgs := list(turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 256})
	unknownNextSQL, unknownNextArgs := list(turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 256, After: turnframe.NewIDGenerator().OutboxID(t0)})
	interventionSQL, interventionArgs := list(turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "acme", Limit: 256})
	tests := []struct {
		name    string
		query   string
		args    []any
		uses    []string // index names (with their constraints) the plan must use
		noScans []string // tables the plan must not scan
		avoids  []string // indexes the plan must not use
		// sortsOnlyParts: every sort sorts a subquery's output, never
		// what a subquery walks.
		sortsOnlyParts bool
	}{
		{
			name: "ClaimReadsDueAndOrderedIndexes", query: sqlitestore.ClaimSQL,
			args: []any{"w", int64(1), 16, int64(2)},
			uses: []string{"outbox_due", "outbox_ordered"}, noScans: []string{"outbox"}, avoids: []string{"outbox_key"},
		},
		{
			name:  "ExpireReadsDispatchingRowsByLeaseEnd",
			query: sqlitestore.ExpireSQL, args: []any{int64(1)},
			uses: []string{"outbox_leases (lease_until<?)"}, noScans: []string{"outbox"},
		},
		{
			// One subject's records, a range of its index already in seq
			// order: no sort, no read of another subject's records.
			name:  "HistoryReadsOneSubjectsRangeInSeqOrder",
			query: sqlitestore.HistorySQL, args: []any{"acme", "01JBZZZZZZZZZZZZZZZZZZZZZZ", "outbox", int64(0), 100},
			uses:    []string{"history_subject (account=? AND ref=? AND kind=? AND rowid>?)"},
			noScans: []string{"history"}, avoids: []string{"TEMP B-TREE"},
		},
		{
			// Prune finds the history of the rows it deletes through their
			// subjects, and those rows through the finished index, oldest
			// first without a sort.
			name:  "PruneHistoryReadsSubjectAndFinishedIndexes",
			query: sqlitestore.PruneHistorySQL, args: []any{int64(1), 256},
			uses:    []string{"history_subject (account=? AND ref=? AND kind=?)", "outbox_finished (finished_at<?)"},
			noScans: []string{"history", "outbox"}, avoids: []string{"TEMP B-TREE"},
		},
		{
			name:  "SettleWritesTheRowByItsSeq",
			query: sqlitestore.SettleOutboxSQL,
			args:  []any{"completed", 1, int64(1), "w", int64(1), "", "", int64(1), int64(1), int64(0), 0, int64(1), "w", 1},
			uses:  []string{"INTEGER PRIMARY KEY (rowid=?)"}, noScans: []string{"outbox"},
		},
		{
			// A group of settlements is one statement: each row of its
			// values finds its outbox row by seq, never a scan.
			name:  "SettleBatchWritesEachRowByItsSeq",
			query: sqlitestore.SettleBatchSQL(2),
			args: []any{int64(1), "completed", int64(1), "", "", int64(1), int64(1), int64(0), "w", 1,
				int64(2), "completed", int64(1), "", "", int64(1), int64(1), int64(0), "w", 1},
			uses: []string{"INTEGER PRIMARY KEY (rowid=?)"}, noScans: []string{"outbox"},
		},
		{
			name:  "PendingCountReadsOnlyThePendingIndex",
			query: sqlitestore.CountPendingSQL, args: []any{"01JBZZZZZZZZZZZZZZZZZZZZZZ"},
			uses: []string{"journal_pending (turn=?)"}, noScans: []string{"journal"},
		},
		{
			name:  "ExtendFindsTheRowByItsSeq",
			query: sqlitestore.ExtendSQL, args: []any{int64(2), int64(1), "w", 1},
			uses: []string{"INTEGER PRIMARY KEY (rowid=?)"}, noScans: []string{"outbox"},
		},
		{
			// The UNIQUE index that refuses a second row of an account's key
			// also finds a row by its key.
			name:  "RowByAccountAndKeyReadsTheUniqueIndex",
			query: `SELECT seq FROM outbox WHERE account = ? AND key = ?`, args: []any{"acme", "k1"},
			uses: []string{"outbox_key (account=? AND key=?)"}, noScans: []string{"outbox"},
		},
		{
			name:  "AdoptionNumbersFromTheEndOfTheJournal",
			query: sqlitestore.AdoptEntrySQL,
			args:  []any{"t", "c", "n", nil, "pending", "", 0, "[]", "", "", int64(1), int64(1), int64(0), false, "acme", "k1"},
			uses:  []string{"sqlite_autoindex_journal_1 (account=? AND key=?)"}, noScans: []string{"journal"},
		},
		{
			// One batch: its rows found oldest first through the finished
			// index without a sort, each deleted by its seq.
			name:  "PruneReadsFinishedIndex",
			query: sqlitestore.PruneSQL, args: []any{int64(1), 256},
			uses:    []string{"outbox_finished (finished_at<?)", "INTEGER PRIMARY KEY (rowid=?)"},
			noScans: []string{"outbox"}, avoids: []string{"TEMP B-TREE"},
		},
		{
			name:  "HoldReadsOrderedIndex",
			query: sqlitestore.HoldSQL, args: []any{"acme", "card", int64(5)},
			uses: []string{"outbox_ordered"}, noScans: []string{"outbox"},
		},
		{
			name:  "LetGoReadsOrderedIndex",
			query: sqlitestore.LetGoSQL, args: []any{"acme", "card"},
			uses: []string{"outbox_ordered"}, noScans: []string{"outbox"},
		},
		{
			name:  "HoldLaterReadsOrderedIndex",
			query: sqlitestore.HoldLaterSQL, args: []any{"acme", "card", int64(5)},
			uses: []string{"outbox_ordered"}, noScans: []string{"outbox"},
		},
		{
			name:  "SettleReadsRowsByTheIDIndex",
			query: sqlitestore.ReadOutboxSQL,
			args:  []any{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"},
			uses:  []string{"sqlite_autoindex_outbox_1"}, noScans: []string{"outbox"},
		},
		{
			// A Begin with a message id looks for an earlier delivery.
			name:  "RedeliveryReadsTheMessageIndex",
			query: sqlitestore.MessageTurnSQL, args: []any{"acme", "upd-1"},
			uses: []string{"turns_message (account=? AND message_id=?)"}, noScans: []string{"turns"},
		},
		{
			// Each part walks its partial index in turn order from the
			// cursor, finds each turn by its key, and stops at the limit:
			// no part sorts or deduplicates what it walks (that would read
			// every unfinished turn after the cursor first). The only sorts
			// are of a part's output, at most limit turns, for the union.
			name:  "UnfinishedReadsPartialIndexesInTurnOrder",
			query: sqlitestore.UnfinishedSQL, args: []any{"", 10, "acme", int64(5)},
			uses: []string{"turns_unfinished (id>?)", "journal_unknown (turn>?)", "journal_pending (turn>?)",
				"journal_awaiting (turn>?)", "sqlite_autoindex_turns_1 (id=?)"},
			noScans: []string{"turns", "journal"}, avoids: []string{"TEMP B-TREE FOR DISTINCT", "turns_message"},
			sortsOnlyParts: true,
		},
		{
			// Run's release lists the unknown rows every PollInterval:
			// it reads their index, already in seq order, not the
			// finished rows.
			name:  "UnknownListingReadsTheUnknownIndex",
			query: unknownSQL, args: unknownArgs,
			uses: []string{"outbox_unknown"}, noScans: []string{"outbox"}, avoids: []string{"TEMP B-TREE"},
		},
		{
			// Recover pages through them after the last row it saw.
			name:  "UnknownListingPagesOnTheUnknownIndex",
			query: unknownNextSQL, args: unknownNextArgs,
			uses: []string{"outbox_unknown (seq>?)"}, noScans: []string{"outbox"}, avoids: []string{"TEMP B-TREE"},
		},
		{
			// Recover lists the rows that need a person, in its scope.
			name:  "InterventionListingReadsTheInterventionIndex",
			query: interventionSQL, args: interventionArgs,
			uses: []string{"outbox_intervention"}, noScans: []string{"outbox"}, avoids: []string{"TEMP B-TREE"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			plan := queryPlan(t, s, tc.query, tc.args...)
			t.Logf("plan:\n  %s", strings.Join(plan, "\n  "))
			all := strings.Join(plan, "\n")
			for _, idx := range tc.uses {
				is.True(strings.Contains(all, idx)) // the plan uses the index
			}
			for _, idx := range tc.avoids {
				is.True(!strings.Contains(all, idx)) // the plan does not use the index
			}
			for i, line := range plan {
				if tc.sortsOnlyParts && strings.Contains(line, "TEMP B-TREE") {
					is.True(i > 0 && strings.HasPrefix(plan[i-1], "SCAN (subquery-")) // a sort of a part's output only
				}
				for _, table := range tc.noScans {
					scan := strings.HasPrefix(line, "SCAN "+table) &&
						!strings.Contains(line, "USING INDEX") && !strings.Contains(line, "USING COVERING INDEX")
					is.True(!scan) // no full scan of the table
				}
			}
		})
	}
}

// Times are stored as INTEGER microseconds: a time.Time bound by mistake
// would be TEXT, and compare after every integer.
func TestTimesAreIntegers(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	claims, err := s.ClaimDue(ctx, t0.Add(time.Hour), 1, "w", lease)
	is.NoErr(err)
	is.NoErr(turnframe.CompleteClaim(ctx, s, claims[0], "ref", t0.Add(time.Hour)))

	columns := map[string][]string{
		"turns":   {"received_at", "updated_at"},
		"journal": {"admitted_at", "updated_at", "lease_until"},
		"events":  {"at"},
		"outbox":  {"due_at", "claimed_at", "created_at", "updated_at", "finished_at", "lease_until"},
	}
	for table, cols := range columns {
		for _, col := range cols {
			var typ string
			is.NoErr(s.ReadDB().QueryRowContext(ctx,
				fmt.Sprintf("SELECT DISTINCT typeof(%s) FROM %s", col, table)).Scan(&typ))
			is.Equal(typ, "integer") // table.col
		}
	}
	var due int64
	is.NoErr(s.ReadDB().QueryRowContext(ctx, "SELECT due_at FROM outbox").Scan(&due))
	is.Equal(due, applied.Outbox[0].CreatedAt.UnixMicro()) // microseconds since the epoch
}

// Bytes read back as they went in: nil as nil, empty as empty.
func TestPayloadsRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{name: "Nil", payload: nil},
		{name: "Empty", payload: []byte{}},
		{name: "Binary", payload: []byte{0, 1, 0xff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t)
			w := begin("acme")
			w.Admit = []turnframe.Command{{Key: "k", Case: "c", Name: "n", Payload: tc.payload}}
			applied, err := s.Apply(ctx, w)
			is.NoErr(err)
			got, err := s.ByKey(ctx, "acme", "k")
			is.NoErr(err)
			is.Equal(got, applied.Admitted[0])              // what Apply returned is what is stored
			is.Equal(got.Payload == nil, tc.payload == nil) // nil stays nil
		})
	}
}
