package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// What a tool result says of its command.
const (
	statusDone     = "done"
	statusAwaiting = "awaiting_approval"
	statusUnknown  = "unknown"
	statusFailed   = "failed"
	statusPending  = "pending"
)

// unknownAdvice is what a tool result tells the model of a call whose
// outcome is unknown.
const unknownAdvice = "outcome unknown — do not retry; tell the user we are verifying"

// toolResult is what the model is told about one tool call. It is built
// from the journal entry, never from memory, so the answer recovery
// regenerates after a crash is the one the process would have given.
type toolResult struct {
	Call     toolCall
	Key      turnframe.IdempotencyKey
	Status   string
	Repeated bool      // an earlier message asked for it: this turn ran nothing
	Since    time.Time // Repeated: when it was first asked for
	Text     string
}

// resultOf describes e to the model. repeated says that an earlier turn
// admitted it (PlanReport); store holds the app's own rows.
func resultOf(ctx context.Context, store *sqlitestore.Store, e turnframe.JournalEntry, repeated bool) (toolResult, error) {
	r := toolResult{Call: callOf(e), Key: e.Key, Repeated: repeated, Since: e.AdmittedAt}
	switch e.Status {
	case turnframe.JournalCommitted:
		r.Status = statusDone
		text, err := doneText(ctx, store, e)
		if err != nil {
			return r, err
		}
		r.Text = text
	case turnframe.JournalAwaitingApproval:
		r.Status, r.Text = statusAwaiting, "waiting for the user's approval: nothing charged yet"
	case turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention:
		r.Status, r.Text = statusUnknown, unknownAdvice
	case turnframe.JournalRejected:
		r.Status, r.Text = statusFailed, "failed ("+e.Code+"): nothing happened"
	default:
		r.Status, r.Text = statusPending, "not run yet"
	}
	if repeated {
		r.Text = fmt.Sprintf("already requested by an earlier message at %s, not run again: %s", e.AdmittedAt.Format("15:04:05"), r.Text)
	}
	return r, nil
}

// doneText says what a committed tool did; a search's results are read
// back from the app's own table, which its commit wrote.
func doneText(ctx context.Context, store *sqlitestore.Store, e turnframe.JournalEntry) (string, error) {
	switch e.Name {
	case toolSearch:
		var raw string
		err := store.ReadDB().QueryRowContext(ctx, `SELECT flights FROM searches WHERE account = ? AND command_key = ?`,
			string(e.Account), string(e.Key)).Scan(&raw)
		if err != nil {
			return "", fmt.Errorf("read the search %s: %w", e.Key, err)
		}
		var found []flight
		if err := json.Unmarshal([]byte(raw), &found); err != nil {
			return "", err
		}
		var parts []string
		for _, f := range found {
			parts = append(parts, fmt.Sprintf("%s at %s for €%d.%02d", f.Flight, f.Departs, f.Cents/100, f.Cents%100))
		}
		return "found " + strings.Join(parts, "; "), nil
	case toolBook:
		return "booked; the airline is told through the outbox", nil
	case toolPay:
		return "paid; payments is charged through the outbox", nil
	case toolEmail:
		return "sent", nil
	}
	return "done", nil
}
