package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/turnframe/turnframe"
)

func showCommand() *command {
	return &command{
		name:    "show",
		args:    "ID",
		summary: "show one outbox row, or one turn with its journal, events and outbox rows",
		help: `Shows the outbox row with this id, with its payload, its attempts (and how
many count against its current budget, once requeued), its last code and, while
it is dispatching, when its claim's lease ends; or else the turn with this id:
its text and answer, its journal entries (with each one's current attempt
id, ATTEMPT ID, which 'turnframe settle --attempt' takes, and when the lease
of an executing one ends), the events they committed, the outbox rows they enqueued, and what
recovery would decide for it — as an application that declares no Remote
would: a command whose Remote forbids re-running a dead attempt shows
resume_commands where the application's recovery declares it unknown. Either ends
with its history, oldest first, as
'turnframe history' prints it. An id that is neither is an error (exit 2).
A value holding a control character prints as a quoted Go string.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 1 {
					return usagef("unexpected argument %q", args[1])
				}
				id, err := parseOutboxID(args, "the id of an outbox row or a turn")
				if err != nil {
					return err
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				rec, err := store.GetOutbox(ctx, id)
				if err == nil {
					subject := turnframe.OutboxSubject(rec.Account, id)
					if *asJSON {
						return writeJSONWithArray(e.stdout, map[string]any{"kind": "outbox", "outbox": outboxView(rec)}, "history",
							func(arr *jsonArray) error { return streamHistoryJSON(ctx, arr, store, subject) })
					}
					if err := printOutboxRecord(e, rec); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "\nhistory:\n")
					return printHistory(ctx, e.stdout, store, subject)
				}
				if !errors.Is(err, turnframe.ErrNotFound) {
					return err
				}
				turnID, _ := turnframe.ParseTurnID(id.String())
				t, err := readTurn(ctx, store, turnID)
				if err != nil {
					return err
				}
				subject := turnframe.TurnSubject(t.turn.Account, turnID)
				if *asJSON {
					return writeJSONWithArray(e.stdout, t.json(), "history",
						func(arr *jsonArray) error { return streamHistoryJSON(ctx, arr, store, subject) })
				}
				if err := t.print(e); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "\nhistory of the turn's phase (each command's own: 'turnframe history --account %s KEY'):\n", cell(string(t.turn.Account)))
				return printHistory(ctx, e.stdout, store, subject)
			}
		},
	}
}

func printOutboxRecord(e *env, r turnframe.OutboxRecord) error {
	v := outboxView(r)
	now := e.now()
	due, lease := "", ""
	if r.Status == turnframe.OutboxPending {
		due = fmt.Sprintf("%s (%s)", stamp(r.DueAt), age(now, r.DueAt))
	}
	if !r.LeaseUntil.IsZero() {
		lease = fmt.Sprintf("%s (%s)", stamp(r.LeaseUntil), leaseState(now, r.LeaseUntil))
	}
	payload := v.Payload
	if v.PayloadBase64 != "" {
		payload = "base64:" + v.PayloadBase64
	}
	return writeFields(e.stdout, [][2]string{
		{"outbox row", v.ID},
		{"status", v.Status},
		{"account", v.Account},
		{"turn", v.Turn},
		{"key", v.Key},
		{"remote key", v.RemoteKey},
		{"destination", v.Destination},
		{"order key", v.OrderKey},
		{"attempts", attemptsText(r)},
		{"due", due},
		{"claimed by", v.ClaimedBy},
		{"claimed at", stamp(r.ClaimedAt)},
		{"lease until", lease},
		{"last code", v.LastCode},
		{"remote ref", v.RemoteRef},
		{"trace context", v.TraceContext},
		{"created", stamp(r.CreatedAt)},
		{"updated", stamp(r.UpdatedAt)},
		{"finished", stamp(r.FinishedAt)},
		{"payload", payload},
	})
}

// attemptsText says how many attempts a row had, and, once it was
// requeued or a claim of it was put back unsent (CodeNotSent), how many of
// them count against its current attempt budget.
func attemptsText(r turnframe.OutboxRecord) string {
	if r.AttemptBase == 0 {
		return itoa(r.Attempts)
	}
	return fmt.Sprintf("%d (%d this budget: %d before it, requeued or put back unsent)", r.Attempts, r.Attempts-r.AttemptBase, r.AttemptBase)
}

// leaseState says whether a lease ending at until still runs at now.
func leaseState(now, until time.Time) string {
	if until.After(now) {
		return "runs for " + roundAge(until.Sub(now)).String()
	}
	return "ended " + roundAge(now.Sub(until)).String() + " ago"
}

// turnDetail is one turn with everything "show" prints about it.
type turnDetail struct {
	turn     turnframe.StoredTurn
	replay   *turnframe.ReplayRecord
	entries  []turnframe.JournalEntry
	events   []turnframe.StoredEvent
	outbox   []turnframe.OutboxRecord
	recovery turnframe.ActionKind
}

// readTurn reads a turn by id alone: the store's reads need its account, so
// the account is looked up first with the operator read (turnAccount), and
// so are the turn's rows (turnOutbox). ErrNotFound when no turn has this id.
func readTurn(ctx context.Context, store opStore, id turnframe.TurnID) (turnDetail, error) {
	acct, err := turnAccount(ctx, store, id)
	if errors.Is(err, turnframe.ErrNotFound) {
		return turnDetail{}, fmt.Errorf("no outbox row or turn has the id %s: %w", id, turnframe.ErrNotFound)
	}
	if err != nil {
		return turnDetail{}, err
	}
	var t turnDetail
	if t.turn, err = store.LoadTurn(ctx, acct, id); err != nil {
		return t, err
	}
	rec := turnframe.NewRecovery(store)
	if t.replay, err = rec.Record(ctx, acct, id); err != nil {
		return t, err
	}
	if t.entries, err = store.ForTurn(ctx, acct, id); err != nil {
		return t, err
	}
	if t.events, err = store.EventsByID(ctx, acct, turnframe.CommittedEventIDs(t.entries)); err != nil {
		return t, err
	}
	action, err := rec.Decide(ctx, acct, id)
	if err != nil {
		return t, err
	}
	t.recovery = action.Kind
	ids, err := store.turnOutbox(ctx, id, turnframe.MaxLimit)
	if err != nil {
		return t, err
	}
	for _, oid := range ids {
		r, err := store.GetOutbox(ctx, oid)
		if err != nil {
			return t, err
		}
		t.outbox = append(t.outbox, r)
	}
	return t, nil
}

// turnDetailJSON is "show --json" for a turn.
type turnDetailJSON struct {
	Kind         string       `json:"kind"` // "turn"
	ID           string       `json:"id"`
	Account      string       `json:"account"`
	Conversation string       `json:"conversation"`
	Phase        string       `json:"phase"`
	Text         string       `json:"text"`
	Response     string       `json:"response,omitempty"`
	AbandonCode  string       `json:"abandon_code,omitempty"`
	ReceivedAt   jsonTime     `json:"received_at"`
	UpdatedAt    jsonTime     `json:"updated_at"`
	Recovery     string       `json:"recovery"`
	Journal      []entryJSON  `json:"journal"`
	Events       []eventJSON  `json:"events"`
	Outbox       []outboxJSON `json:"outbox"`
}

func (t turnDetail) json() turnDetailJSON {
	v := turnDetailJSON{
		Kind: "turn", ID: t.turn.ID.String(), Account: string(t.turn.Account),
		Conversation: t.turn.Conversation.String(), Phase: t.turn.Phase.String(), Text: t.turn.Text,
		ReceivedAt: at(t.turn.ReceivedAt), UpdatedAt: at(t.turn.UpdatedAt), Recovery: t.recovery.String(),
		Journal: []entryJSON{}, Events: []eventJSON{}, Outbox: []outboxJSON{},
	}
	if t.replay != nil {
		v.Response, v.AbandonCode = t.replay.Response, t.replay.AbandonCode
	}
	for _, e := range t.entries {
		v.Journal = append(v.Journal, entryView(e))
	}
	for _, ev := range t.events {
		v.Events = append(v.Events, eventView(ev))
	}
	for _, r := range t.outbox {
		v.Outbox = append(v.Outbox, outboxView(r))
	}
	return v
}

// journalColumns are the columns of a turn's journal table: ATTEMPT ID is
// the entry's current attempt, which 'turnframe settle --attempt' takes.
var journalColumns = []string{"KEY", "COMMAND", "CASE", "STATUS", "ATTEMPTS", "ATTEMPT ID", "LEASE UNTIL", "CODE", "REMOTE REF", "UPDATED"}

func (t turnDetail) print(e *env) error {
	v := t.json()
	if err := writeFields(e.stdout, [][2]string{
		{"turn", v.ID},
		{"account", v.Account},
		{"conversation", v.Conversation},
		{"phase", v.Phase},
		{"received", stamp(t.turn.ReceivedAt)},
		{"updated", fmt.Sprintf("%s (%s ago)", stamp(t.turn.UpdatedAt), age(e.now(), t.turn.UpdatedAt))},
		{"text", v.Text},
		{"response", v.Response},
		{"abandoned", v.AbandonCode},
		{"recovery", v.Recovery},
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\njournal:\n")
	var rows [][]string
	for _, j := range t.entries {
		rows = append(rows, []string{string(j.Key), j.Name, string(j.Case), j.Status.String(), itoa(j.Attempts),
			entryView(j).Attempt, stamp(j.LeaseUntil), j.Code, j.RemoteRef, stamp(j.UpdatedAt)})
	}
	if err := writeTable(e.stdout, journalColumns, rows); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nevents:\n")
	rows = nil
	for _, ev := range t.events {
		rows = append(rows, []string{ev.ID.String(), string(ev.Case), strconv.FormatUint(uint64(ev.Revision), 10), ev.Type, string(ev.Key), stamp(ev.At)})
	}
	if err := writeTable(e.stdout, []string{"ID", "CASE", "REVISION", "TYPE", "KEY", "AT"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\noutbox:\n")
	rows = nil
	for _, r := range t.outbox {
		rows = append(rows, outboxRow(r))
	}
	return writeTable(e.stdout, outboxColumns, rows)
}
