package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

func statusCommand() *command {
	return &command{
		name:    "status",
		summary: "counts per outbox status and turn phase, the oldest due row, stale claims, unknown outcomes",
		help: `Summarises a turnframe database, read through the read pool (it never waits
for the application's writes): how many outbox rows are in each status and how
many of the pending ones are due, how many turns are in each phase, how long
the oldest due row has waited, which claims are older than --claim-age (a
dispatcher that died holding them: see 'turnframe release'), and which rows and
journal entries are outcome unknown, awaiting reconciliation ('turnframe settle').`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			claimAge := fs.Duration("claim-age", 5*time.Minute, "report claims older than this as stale")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if *claimAge < 0 {
					return usagef("--claim-age must not be negative")
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				st, err := readStatus(ctx, store, e.now().UTC(), *claimAge)
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(e.stdout, st)
				}
				return st.print(e)
			}
		},
	}
}

// statusJSON is what "status" reports.
type statusJSON struct {
	Path           string         `json:"path"`
	At             time.Time      `json:"at"`
	Outbox         map[string]int `json:"outbox"`     // rows per status
	DueNow         int            `json:"due_now"`    // pending rows due at At
	Turns          map[string]int `json:"turns"`      // turns per phase
	OldestDue      *dueJSON       `json:"oldest_due"` // the pending row due the longest, if any
	ClaimAge       string         `json:"claim_age"`  // the threshold of stale_claims
	StaleClaims    []claimJSON    `json:"stale_claims"`
	Unknown        []outboxJSON   `json:"unknown"` // outbox rows awaiting reconciliation (at most 100)
	UnknownRows    int            `json:"unknown_rows"`
	UnknownJournal int            `json:"unknown_journal_entries"` // commands awaiting Runtime.ReconcileCommand
}

type dueJSON struct {
	ID     string    `json:"id"`
	DueAt  time.Time `json:"due_at"`
	Waited string    `json:"waited"`
}

type claimJSON struct {
	ID        string    `json:"id"`
	ClaimedBy string    `json:"claimed_by"`
	ClaimedAt time.Time `json:"claimed_at"`
	Age       string    `json:"age"`
}

// statusListLimit bounds the stale claims and unknown rows status lists.
const statusListLimit = 100

// readStatus reads the counts through the read pool: the store's API has
// no counting call, so they are read-only SQL over the schema of package
// schema.
func readStatus(ctx context.Context, store *sqlitestore.Store, now time.Time, claimAge time.Duration) (statusJSON, error) {
	db := store.ReadDB()
	st := statusJSON{
		Path: store.Path(), At: now, ClaimAge: claimAge.String(),
		Outbox: map[string]int{}, Turns: map[string]int{},
		StaleClaims: []claimJSON{}, Unknown: []outboxJSON{},
	}
	for s := turnframe.OutboxPending; s <= turnframe.OutboxOutcomeUnknown; s++ {
		st.Outbox[s.String()] = 0
	}
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		st.Turns[p.String()] = 0
	}
	if err := countInto(ctx, db, st.Outbox, "SELECT status, count(*) FROM outbox GROUP BY status"); err != nil {
		return st, err
	}
	if err := countInto(ctx, db, st.Turns, "SELECT phase, count(*) FROM turns GROUP BY phase"); err != nil {
		return st, err
	}
	us := now.UnixMicro()
	if err := db.QueryRowContext(ctx,
		"SELECT count(*) FROM outbox WHERE status = 'pending' AND due_at <= ?", us).Scan(&st.DueNow); err != nil {
		return st, fmt.Errorf("count due rows: %w", err)
	}
	var id string
	var due int64
	err := db.QueryRowContext(ctx, `SELECT id, due_at FROM outbox WHERE status = 'pending' AND due_at <= ?
		ORDER BY due_at, seq LIMIT 1`, us).Scan(&id, &due)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return st, fmt.Errorf("read the oldest due row: %w", err)
	default:
		at := time.UnixMicro(due).UTC()
		st.OldestDue = &dueJSON{ID: id, DueAt: at, Waited: roundAge(now.Sub(at)).String()}
	}
	rows, err := db.QueryContext(ctx, `SELECT id, claimed_by, claimed_at FROM outbox
		WHERE status = 'dispatching' AND claimed_at < ? ORDER BY claimed_at LIMIT ?`,
		now.Add(-claimAge).UnixMicro(), statusListLimit)
	if err != nil {
		return st, fmt.Errorf("read stale claims: %w", err)
	}
	for rows.Next() {
		var c claimJSON
		var at int64
		if err := rows.Scan(&c.ID, &c.ClaimedBy, &at); err != nil {
			rows.Close()
			return st, fmt.Errorf("read stale claims: %w", err)
		}
		c.ClaimedAt = time.UnixMicro(at).UTC()
		c.Age = roundAge(now.Sub(c.ClaimedAt)).String()
		st.StaleClaims = append(st.StaleClaims, c)
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	unknown, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: statusListLimit})
	if err != nil {
		return st, err
	}
	for _, r := range unknown {
		st.Unknown = append(st.Unknown, outboxView(r))
	}
	st.UnknownRows = st.Outbox[turnframe.OutboxOutcomeUnknown.String()]
	if err := db.QueryRowContext(ctx,
		"SELECT count(*) FROM journal WHERE status = 'outcome_unknown'").Scan(&st.UnknownJournal); err != nil {
		return st, fmt.Errorf("count unknown journal entries: %w", err)
	}
	return st, nil
}

func countInto(ctx context.Context, db *sql.DB, into map[string]int, query string) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("count: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return fmt.Errorf("count: %w", err)
		}
		into[name] = n
	}
	return rows.Err()
}

func (st statusJSON) print(e *env) error {
	var outbox, turns []string
	for s := turnframe.OutboxPending; s <= turnframe.OutboxOutcomeUnknown; s++ {
		outbox = append(outbox, fmt.Sprintf("%s %d", s, st.Outbox[s.String()]))
	}
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		turns = append(turns, fmt.Sprintf("%s %d", p, st.Turns[p.String()]))
	}
	oldest := "none"
	if st.OldestDue != nil {
		oldest = fmt.Sprintf("%s, due %s, waiting %s", st.OldestDue.ID, stamp(st.OldestDue.DueAt), st.OldestDue.Waited)
	}
	stale := fmt.Sprintf("%d older than %s", len(st.StaleClaims), st.ClaimAge)
	if err := writeFields(e.stdout, [][2]string{
		{"database", st.Path},
		{"outbox", strings.Join(outbox, "  ")},
		{"due now", itoa(st.DueNow)},
		{"turns", strings.Join(turns, "  ")},
		{"oldest due row", oldest},
		{"claims", stale},
		{"outcome unknown", fmt.Sprintf("outbox rows %d, journal entries %d (awaiting reconciliation)", st.UnknownRows, st.UnknownJournal)},
	}); err != nil {
		return err
	}
	if len(st.StaleClaims) > 0 {
		fmt.Fprintf(e.stdout, "\nstale claims (put them back with 'turnframe release --older-than %s'):\n", st.ClaimAge)
		var rows [][]string
		for _, c := range st.StaleClaims {
			rows = append(rows, []string{c.ID, c.ClaimedBy, stamp(c.ClaimedAt), c.Age})
		}
		if err := writeTable(e.stdout, []string{"ID", "CLAIMED BY", "CLAIMED AT", "AGE"}, rows); err != nil {
			return err
		}
	}
	if len(st.Unknown) > 0 {
		fmt.Fprintf(e.stdout, "\noutbox rows awaiting reconciliation (settle each with 'turnframe settle ID completed|failed|resend'):\n")
		var rows [][]string
		for _, r := range st.Unknown {
			rows = append(rows, []string{r.ID, r.Account, r.Key, r.Destination, itoa(r.Attempts), stamp(r.UpdatedAt)})
		}
		if err := writeTable(e.stdout, []string{"ID", "ACCOUNT", "KEY", "DESTINATION", "ATTEMPTS", "SINCE"}, rows); err != nil {
			return err
		}
	}
	return nil
}
