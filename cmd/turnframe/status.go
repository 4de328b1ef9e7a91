package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
)

func statusCommand() *command {
	return &command{
		name:    "status",
		summary: "what needs a person, counts per status and phase, the oldest due row, ended leases, unknowns",
		help: `Summarises a turnframe database, read through the read pool (it never waits
for the application's writes). First what needs a person: the outbox rows and
journal entries that need intervention — outcomes nothing could settle safely,
which only a person or the application settles ('turnframe settle'; 'turnframe
history' says why each got there), and the commands awaiting approval
('turnframe approve', 'turnframe deny'). Then how many outbox rows are in each
status; how many are due now — rows a claim would take now, not rows held
behind an earlier row of their order key, which are counted apart — and how
long the oldest of them has waited; how many turns are in each phase; which
claims' leases have ended, and how long ago (a dispatcher that died holding
them: the application's Recover, or 'turnframe release', marks them
outcome_unknown); and which rows and journal entries are outcome unknown,
which the application's Recover resolves by the policy of their remote, or a
person with 'turnframe settle'. Each list shows at most 100.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				st, err := readStatus(ctx, store, e.now().UTC())
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
	At             jsonTime       `json:"at"`
	Outbox         map[string]int `json:"outbox"`       // rows per status
	DueNow         int            `json:"due_now"`      // pending rows a claim would take at At
	Held           int            `json:"held"`         // pending rows whose due time came, held behind an earlier row of their order key
	Turns          map[string]int `json:"turns"`        // turns per phase
	OldestDue      *dueJSON       `json:"oldest_due"`   // the due row that has waited longest, if any
	EndedLeases    []leaseJSON    `json:"ended_leases"` // dispatching rows whose lease ended (at most 100)
	EndedLeaseRows int            `json:"ended_lease_rows"`
	Unknown        []outboxJSON   `json:"unknown"` // outcome_unknown outbox rows (at most 100)
	UnknownRows    int            `json:"unknown_rows"`
	UnknownJournal int            `json:"unknown_journal_entries"` // outcome_unknown commands
	UnknownEntries []statusEntry  `json:"unknown_entries"`         // the first of them (at most 100)
	// NeedsIntervention lists the outbox rows a person must settle (at most
	// 100), NeedsInterventionEntries the journal entries (at most 100).
	NeedsIntervention        []outboxJSON  `json:"needs_intervention"`
	NeedsInterventionRows    int           `json:"needs_intervention_rows"`
	NeedsInterventionJournal int           `json:"needs_intervention_journal_entries"`
	NeedsInterventionEntries []statusEntry `json:"needs_intervention_entries"`
	// AwaitingApproval lists the journal entries awaiting approval (at
	// most 100, oldest first), AwaitingApprovalJournal counts them.
	AwaitingApprovalJournal int           `json:"awaiting_approval_journal_entries"`
	AwaitingApproval        []statusEntry `json:"awaiting_approval"`
}

// statusEntry is a journal entry as status lists it: with its account and
// turn, which settle and history need.
type statusEntry struct {
	Account string `json:"account"`
	Turn    string `json:"turn"`
	entryJSON
}

type dueJSON struct {
	ID     string   `json:"id"`
	DueAt  jsonTime `json:"due_at"`
	Waited string   `json:"waited"`
}

// leaseJSON is a claim whose lease ended: its dispatcher neither settled
// the row nor extended the lease in time, so it is taken for dead.
type leaseJSON struct {
	ID         string   `json:"id"`
	ClaimedBy  string   `json:"claimed_by"`
	ClaimedAt  jsonTime `json:"claimed_at"`
	LeaseUntil jsonTime `json:"lease_until"`
	EndedAgo   string   `json:"ended_ago"`
}

// statusListLimit bounds the ended leases and unknown rows status lists.
const statusListLimit = 100

// readStatus reads the counts with the store's operator reads (opStore):
// the store's API has no counting call.
func readStatus(ctx context.Context, store opStore, now time.Time) (statusJSON, error) {
	st := statusJSON{
		Path: store.Name(), At: at(now),
		Outbox: map[string]int{}, Turns: map[string]int{},
		EndedLeases: []leaseJSON{}, Unknown: []outboxJSON{}, UnknownEntries: []statusEntry{},
		NeedsIntervention: []outboxJSON{}, NeedsInterventionEntries: []statusEntry{}, AwaitingApproval: []statusEntry{},
	}
	for _, s := range outboxStatuses() {
		st.Outbox[s.String()] = 0
	}
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		st.Turns[p.String()] = 0
	}
	outbox, turns, err := store.counts(ctx)
	if err != nil {
		return st, err
	}
	maps.Copy(st.Outbox, outbox)
	maps.Copy(st.Turns, turns)
	due, err := store.due(ctx, now)
	if err != nil {
		return st, err
	}
	st.DueNow, st.Held = due.rows, due.held
	if !due.oldest.IsZero() {
		st.OldestDue = &dueJSON{ID: due.oldest.String(), DueAt: at(due.oldestDueAt), Waited: age(now, due.oldestDueAt)}
	}
	if st.EndedLeases, st.EndedLeaseRows, err = endedLeases(ctx, store, now); err != nil {
		return st, err
	}
	if st.NeedsIntervention, err = uncertainRows(ctx, store, turnframe.OutboxNeedsIntervention); err != nil {
		return st, err
	}
	st.NeedsInterventionRows = st.Outbox[turnframe.OutboxNeedsIntervention.String()]
	if st.NeedsInterventionEntries, st.NeedsInterventionJournal, err = uncertainEntries(ctx, store, turnframe.JournalNeedsIntervention); err != nil {
		return st, err
	}
	if st.AwaitingApproval, st.AwaitingApprovalJournal, err = uncertainEntries(ctx, store, turnframe.JournalAwaitingApproval); err != nil {
		return st, err
	}
	if st.Unknown, err = uncertainRows(ctx, store, turnframe.OutboxOutcomeUnknown); err != nil {
		return st, err
	}
	st.UnknownRows = st.Outbox[turnframe.OutboxOutcomeUnknown.String()]
	if st.UnknownEntries, st.UnknownJournal, err = uncertainEntries(ctx, store, turnframe.JournalOutcomeUnknown); err != nil {
		return st, err
	}
	return st, nil
}

// outboxStatuses returns every outbox status, in the order status prints
// them.
func outboxStatuses() []turnframe.OutboxStatus {
	return []turnframe.OutboxStatus{
		turnframe.OutboxPending, turnframe.OutboxDispatching, turnframe.OutboxCompleted, turnframe.OutboxFailed,
		turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention,
	}
}

// uncertainRows returns the first statusListLimit outbox rows in status s,
// oldest first.
func uncertainRows(ctx context.Context, store opStore, s turnframe.OutboxStatus) ([]outboxJSON, error) {
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Status: s, Limit: statusListLimit})
	if err != nil {
		return nil, err
	}
	out := make([]outboxJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, outboxView(r))
	}
	return out, nil
}

// uncertainEntries returns the journal entries in status s, longest in it
// first (at most statusListLimit), and how many there are. The store has no
// listing of entries by status, so the operator read finds them, and ByKey
// reads each as the store sees it.
func uncertainEntries(ctx context.Context, store opStore, s turnframe.JournalStatus) ([]statusEntry, int, error) {
	keys, n, err := store.entriesIn(ctx, s, statusListLimit)
	if err != nil {
		return nil, 0, err
	}
	out := []statusEntry{}
	for _, f := range keys {
		e, err := store.ByKey(ctx, f.account, f.key)
		if err != nil {
			return nil, 0, err
		}
		if e.Status != s {
			continue // settled since the listing
		}
		out = append(out, statusEntry{Account: string(f.account), Turn: e.Turn.String(), entryJSON: entryView(e)})
	}
	return out, n, nil
}

// endedLeases returns the claims whose lease ended at now, longest ended
// first (at most statusListLimit), and how many there are. The operator
// read finds the candidates by the lease index; turnframe.LeaseEnded, the
// rule ExpireClaims applies, decides which of them are listed.
func endedLeases(ctx context.Context, store opStore, now time.Time) ([]leaseJSON, int, error) {
	ids, n, err := store.endedLeases(ctx, now, statusListLimit)
	if err != nil {
		return nil, 0, err
	}
	out := []leaseJSON{}
	for _, id := range ids {
		r, err := store.GetOutbox(ctx, id)
		if errors.Is(err, turnframe.ErrNotFound) {
			continue // pruned since: it was no claim any more
		}
		if err != nil {
			return nil, 0, err
		}
		if !turnframe.LeaseEnded(r, now) {
			continue // settled or extended since the listing
		}
		out = append(out, leaseJSON{ID: r.ID.String(), ClaimedBy: r.ClaimedBy, ClaimedAt: at(r.ClaimedAt),
			LeaseUntil: at(r.LeaseUntil), EndedAgo: age(now, r.LeaseUntil)})
	}
	return out, n, nil
}

func (st statusJSON) print(e *env) error {
	var outbox, turns []string
	for _, s := range outboxStatuses() {
		outbox = append(outbox, fmt.Sprintf("%s %d", s, st.Outbox[s.String()]))
	}
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		turns = append(turns, fmt.Sprintf("%s %d", p, st.Turns[p.String()]))
	}
	due := itoa(st.DueNow)
	if st.Held > 0 {
		due += fmt.Sprintf(" (and %d held behind an earlier row of their order key)", st.Held)
	}
	oldest := "none"
	if st.OldestDue != nil {
		oldest = fmt.Sprintf("%s, due %s, waiting %s", st.OldestDue.ID, stamp(st.OldestDue.DueAt.Time), st.OldestDue.Waited)
	}
	claims := fmt.Sprintf("%d dispatching, %d with the lease ended", st.Outbox[turnframe.OutboxDispatching.String()], st.EndedLeaseRows)
	if err := writeFields(e.stdout, [][2]string{
		{"database", st.Path},
		{"needs intervention", fmt.Sprintf("outbox rows %d, journal entries %d (a person must settle each)", st.NeedsInterventionRows, st.NeedsInterventionJournal)},
		{"awaiting approval", fmt.Sprintf("journal entries %d (a person approves or denies each: 'turnframe approvals')", st.AwaitingApprovalJournal)},
		{"outbox", strings.Join(outbox, "  ")},
		{"due now", due},
		{"turns", strings.Join(turns, "  ")},
		{"oldest due row", oldest},
		{"claims", claims},
		{"outcome unknown", fmt.Sprintf("outbox rows %d, journal entries %d (the app's Recover resolves them by policy)", st.UnknownRows, st.UnknownJournal)},
	}); err != nil {
		return err
	}
	if len(st.NeedsIntervention) > 0 {
		fmt.Fprintf(e.stdout, "\noutbox rows that need intervention: nothing could settle them safely; find out from the remote, then\n"+
			"'turnframe settle ID completed|failed|resend' ('turnframe history ID' says how each got here):\n")
		if err := writeUncertainRows(e, st.NeedsIntervention); err != nil {
			return err
		}
	}
	if len(st.NeedsInterventionEntries) > 0 {
		fmt.Fprintf(e.stdout, "\njournal entries that need intervention: find out from the remote, then\n"+
			"'turnframe settle --account A KEY completed|failed|resend' ('turnframe history --account A KEY' says how each got here):\n")
		if err := writeUncertainEntries(e, st.NeedsInterventionEntries); err != nil {
			return err
		}
	}
	if len(st.AwaitingApproval) > 0 {
		fmt.Fprintf(e.stdout, "\ncommands awaiting approval: they never run before 'turnframe approve --account A KEY'\n"+
			"('turnframe deny --account A KEY' rejects one):\n")
		if err := writeAwaitingEntries(e, st.AwaitingApproval); err != nil {
			return err
		}
	}
	if len(st.EndedLeases) > 0 {
		fmt.Fprintf(e.stdout, "\nclaims whose lease ended: their dispatcher stopped without settling them, so their send may have started\n"+
			"(the app's Recover, or 'turnframe release', marks them outcome_unknown):\n")
		var rows [][]string
		for _, c := range st.EndedLeases {
			rows = append(rows, []string{c.ID, c.ClaimedBy, stamp(c.ClaimedAt.Time), stamp(c.LeaseUntil.Time), c.EndedAgo + " ago"})
		}
		if err := writeTable(e.stdout, []string{"ID", "CLAIMED BY", "CLAIMED AT", "LEASE ENDED", "ENDED"}, rows); err != nil {
			return err
		}
	}
	if len(st.Unknown) > 0 {
		fmt.Fprintf(e.stdout, "\noutbox rows whose outcome is unknown (the app's Recover resolves them by the policy of their remote;\n"+
			"or settle one with 'turnframe settle ID completed|failed|resend|escalate'):\n")
		if err := writeUncertainRows(e, st.Unknown); err != nil {
			return err
		}
	}
	if len(st.UnknownEntries) > 0 {
		fmt.Fprintf(e.stdout, "\njournal entries whose outcome is unknown (the app's Recover resolves them by the policy of their remote;\n"+
			"or settle one with 'turnframe settle --account A KEY completed|failed|resend|escalate'):\n")
		if err := writeUncertainEntries(e, st.UnknownEntries); err != nil {
			return err
		}
	}
	return nil
}

func writeUncertainRows(e *env, list []outboxJSON) error {
	var rows [][]string
	for _, r := range list {
		rows = append(rows, []string{r.ID, r.Account, r.Key, r.Destination, itoa(r.Attempts), r.LastCode, stamp(r.UpdatedAt.Time)})
	}
	return writeTable(e.stdout, []string{"ID", "ACCOUNT", "KEY", "DESTINATION", "ATTEMPTS", "LAST CODE", "SINCE"}, rows)
}

func writeUncertainEntries(e *env, list []statusEntry) error {
	var rows [][]string
	for _, j := range list {
		rows = append(rows, []string{j.Account, j.Key, j.Name, j.Turn, itoa(j.Attempts), j.Code, stamp(j.UpdatedAt.Time)})
	}
	return writeTable(e.stdout, []string{"ACCOUNT", "KEY", "COMMAND", "TURN", "ATTEMPTS", "CODE", "SINCE"}, rows)
}
