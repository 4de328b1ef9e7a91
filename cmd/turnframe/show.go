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
A value holding a control or format character, or a rune drawn as nothing,
prints as a quoted Go string. A payload
longer than 4096 bytes prints cut there, followed by its size; --json prints
it whole. A payload that is not UTF-8 prints as base64: and its base64 form
(text that itself begins with base64: is noted as text).

A turn's outbox rows are listed in enqueue order, read 100 at a time and
printed as they are read. --limit (at most 10000) bounds them; when rows
remain past it, a "more:" line on stderr gives the --after to read on with
('turnframe show TURN --after ROW' shows the turn again, its rows from the
one after ROW on).`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			limit := fs.Int("limit", 100, "at most this many of a turn's outbox rows (1–10000)")
			after := fs.String("after", "", "a turn's outbox rows enqueued after the row with this `id` (the \"more:\" line gives it)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 1 {
					return usagef("unexpected argument %q", args[1])
				}
				id, err := parseOutboxID(args, "the id of an outbox row or a turn")
				if err != nil {
					return err
				}
				if err := checkListLimit(*limit); err != nil {
					return err
				}
				var cursor turnframe.OutboxID
				if *after != "" {
					if cursor, err = turnframe.ParseOutboxID(*after); err != nil {
						return usagef("--after %q is not an outbox row id", *after)
					}
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
				rows := func(write func([]turnframe.OutboxRecord) error) (string, error) {
					return turnRows(ctx, e, store, turnID, *limit, cursor, write)
				}
				var next string
				if *asJSON {
					err := writeJSONWithArrays(e.stdout, t.json(), []jsonStream{
						{"outbox", func(arr *jsonArray) error {
							next, err = rows(func(page []turnframe.OutboxRecord) error {
								for _, r := range page {
									if err := arr.add(outboxView(r)); err != nil {
										return err
									}
								}
								return nil
							})
							return err
						}},
						{"history", func(arr *jsonArray) error { return streamHistoryJSON(ctx, arr, store, subject) }},
					})
					if err != nil {
						return err
					}
					moreHint(e, "show "+turnID.String(), next)
					return nil
				}
				if err := t.print(e); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "\noutbox:\n")
				out := newListOutput(e.stdout, outboxColumns, false)
				next, err = rows(func(page []turnframe.OutboxRecord) error {
					table := make([][]string, 0, len(page))
					for _, r := range page {
						table = append(table, outboxRow(r))
					}
					return out.page(table, nil)
				})
				if err != nil {
					return err
				}
				if err := out.close(); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "\nhistory of the turn's phase (each command's own: 'turnframe history --account %s KEY'):\n", cell(string(t.turn.Account)))
				if err := printHistory(ctx, e.stdout, store, subject); err != nil {
					return err
				}
				moreHint(e, "show "+turnID.String(), next)
				return nil
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
	payload, note := payloadPreview(v.Payload, v.PayloadBase64, len(r.Payload))
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
		{"payload note", note},
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

// turnDetail is one turn with everything "show" prints about it but its
// outbox rows, which it reads a page at a time (turnRows).
type turnDetail struct {
	turn     turnframe.StoredTurn
	replay   *turnframe.ReplayRecord
	entries  []turnframe.JournalEntry
	events   []turnframe.StoredEvent
	recovery turnframe.ActionKind
}

// readTurn reads a turn by id alone, without its outbox rows (turnRows):
// the store's reads need its account, so the account is looked up first
// with the operator read (turnAccount). The decision is Recovery.Triage's,
// which reads no event data. ErrNotFound when no turn has this id.
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
	action, err := rec.Triage(ctx, acct, id)
	if err != nil {
		return t, err
	}
	t.recovery = action.Kind
	return t, nil
}

// turnRows reads the outbox rows the turn enqueued after the row with id
// after (from the first for the zero id), a page at a time, and hands each
// page to write as it comes, as the listings do (pageThrough): at most
// limit rows, and next is the --after to read on with when more remain. A
// row pruned between its id's read and its own is left out.
func turnRows(ctx context.Context, e *env, store opStore, turn turnframe.TurnID, limit int, after turnframe.OutboxID,
	write func([]turnframe.OutboxRecord) error) (next string, err error) {
	type row struct {
		id  turnframe.OutboxID
		rec *turnframe.OutboxRecord // nil: pruned since its id was read
	}
	cursor := ""
	if !after.IsZero() {
		cursor = after.String()
	}
	return pageThrough(ctx, e, limit, cursor,
		func(ctx context.Context, after string, n int) ([]row, error) {
			from, _ := turnframe.ParseOutboxID(after) // a row's own id; "" is the zero id
			ids, err := store.turnOutbox(ctx, turn, from, n)
			if err != nil {
				return nil, err
			}
			page := make([]row, 0, len(ids))
			for _, id := range ids {
				r, err := store.GetOutbox(ctx, id)
				switch {
				case errors.Is(err, turnframe.ErrNotFound):
					page = append(page, row{id: id})
				case err != nil:
					return nil, err
				default:
					page = append(page, row{id: id, rec: &r})
				}
			}
			return page, nil
		},
		func(r row) string { return r.id.String() },
		func(page []row) error {
			recs := make([]turnframe.OutboxRecord, 0, len(page))
			for _, r := range page {
				if r.rec != nil {
					recs = append(recs, *r.rec)
				}
			}
			return write(recs)
		})
}

// turnDetailJSON is "show --json" for a turn.
type turnDetailJSON struct {
	Kind         string      `json:"kind"` // "turn"
	ID           string      `json:"id"`
	Account      string      `json:"account"`
	Conversation string      `json:"conversation"`
	Phase        string      `json:"phase"`
	Text         string      `json:"text"`
	Response     string      `json:"response,omitempty"`
	AbandonCode  string      `json:"abandon_code,omitempty"`
	ReceivedAt   jsonTime    `json:"received_at"`
	UpdatedAt    jsonTime    `json:"updated_at"`
	Recovery     string      `json:"recovery"`
	Journal      []entryJSON `json:"journal"`
	Events       []eventJSON `json:"events"`
	// Outbox is the ui's page of the turn's rows; "show --json" streams
	// them after the events instead.
	Outbox []outboxJSON `json:"outbox,omitempty"`
}

func (t turnDetail) json() turnDetailJSON {
	v := turnDetailJSON{
		Kind: "turn", ID: t.turn.ID.String(), Account: string(t.turn.Account),
		Conversation: t.turn.Conversation.String(), Phase: t.turn.Phase.String(), Text: t.turn.Text,
		ReceivedAt: at(t.turn.ReceivedAt), UpdatedAt: at(t.turn.UpdatedAt), Recovery: t.recovery.String(),
		Journal: []entryJSON{}, Events: []eventJSON{},
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
	return nil
}
