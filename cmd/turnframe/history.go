package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/turnframe/turnframe"
)

func historyCommand() *command {
	return &command{
		name:    "history",
		args:    "ID | --account A KEY",
		summary: "the audit trail of an outbox row or a turn (ID), or of a journal entry (--account A KEY)",
		help: `Prints the audit trail of the outbox row or the turn with this ID (both, in
the unlikely case both exist), or, with --account, of the journal entry that
account admitted under KEY: every move, oldest first — when, from → to, who
(worker:ID, recovery, policy, operator, app, or the application's own actor),
the attempt, the code, the remote's reference and the note. A record marked
"evidence" moved nothing: something learnt, such as an answer that came after
its deadline or a lookup at the remote that could not tell; its from and to
are the status it found.

The trail is read a page at a time (at most 1000 records held at once), so
the columns of the table are aligned per page; --json prints one JSON array,
streamed. An id or a key that names nothing is an error (exit 2).`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			account := fs.String("account", "", "the journal entry this `account` admitted under KEY, instead of a row or turn")
			asJSON := fs.Bool("json", false, "print a JSON array of the records")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 1 {
					return usagef("unexpected argument %q", args[1])
				}
				find, err := parseHistoryArgs(args, *account)
				if err != nil {
					return err
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				subjects, err := find(ctx, store)
				if err != nil {
					return err
				}
				if *asJSON {
					arr := newJSONArray(e.stdout, "")
					for _, s := range subjects {
						if err := streamHistoryJSON(ctx, arr, store, s.subject); err != nil {
							return err
						}
					}
					if err := arr.close(); err != nil {
						return err
					}
					_, err := io.WriteString(e.stdout, "\n")
					return err
				}
				for i, s := range subjects {
					if i > 0 {
						fmt.Fprintln(e.stdout)
					}
					fmt.Fprintf(e.stdout, "history of %s:\n", s.title)
					if err := printHistory(ctx, e.stdout, store, s.subject); err != nil {
						return err
					}
				}
				return nil
			}
		},
	}
}

// namedSubject is a subject with a title for a person.
type namedSubject struct {
	subject turnframe.Subject
	title   string
}

// parseHistoryArgs checks history's arguments and returns how to find the
// subjects they name once the store is open.
func parseHistoryArgs(args []string, account string) (func(context.Context, opStore) ([]namedSubject, error), error) {
	if account != "" {
		acct := turnframe.AccountID(account)
		if err := acct.Validate(); err != nil {
			return nil, usagef("--account: %v", err)
		}
		if len(args) == 0 {
			return nil, usagef("missing the key of the journal entry")
		}
		key := turnframe.IdempotencyKey(args[0])
		if err := key.ValidateStored(); err != nil {
			return nil, usagef("%q is not an idempotency key: %v", args[0], err)
		}
		return func(ctx context.Context, store opStore) ([]namedSubject, error) {
			e, err := store.ByKey(ctx, acct, key)
			if err != nil {
				return nil, unreadEntry(acct, key, err)
			}
			return []namedSubject{{
				subject: turnframe.JournalSubject(acct, key),
				title: fmt.Sprintf("journal entry %s (account %s, command %s, turn %s, now %s)",
					cell(string(key)), cell(account), cell(e.Name), e.Turn, e.Status),
			}}, nil
		}, nil
	}
	id, err := parseOutboxID(args, "the id of an outbox row or a turn (or --account A KEY for a journal entry)")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, store opStore) ([]namedSubject, error) {
		return subjectsOfID(ctx, store, id)
	}, nil
}

// subjectsOfID returns the outbox row and the turn with this id, whichever
// exist: ids are ULIDs, unique in practice across both, but each table is
// looked up so that neither hides the other.
func subjectsOfID(ctx context.Context, store opStore, id turnframe.OutboxID) ([]namedSubject, error) {
	var out []namedSubject
	rec, err := store.GetOutbox(ctx, id)
	switch {
	case err == nil:
		out = append(out, namedSubject{
			subject: turnframe.OutboxSubject(rec.Account, id),
			title: fmt.Sprintf("outbox row %s (account %s, %s, key %s, now %s)",
				id, cell(string(rec.Account)), cell(rec.Destination), cell(string(rec.Key)), rec.Status),
		})
	case !errors.Is(err, turnframe.ErrNotFound):
		return nil, err
	}
	turn, _ := turnframe.ParseTurnID(id.String())
	account, err := turnAccount(ctx, store, turn)
	switch {
	case err == nil:
		m, err := store.TurnPhase(ctx, account, turn)
		if err != nil {
			return nil, err
		}
		out = append(out, namedSubject{
			subject: turnframe.TurnSubject(account, turn),
			title:   fmt.Sprintf("turn %s (account %s, now %s)", turn, cell(string(account)), m.Phase),
		})
	case !errors.Is(err, turnframe.ErrNotFound):
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no outbox row or turn has the id %s: %w", id, turnframe.ErrNotFound)
	}
	return out, nil
}

// turnAccount returns the account of the turn with this id: the store's
// reads need it, so it is looked up with the operator read. ErrNotFound
// when no turn has the id.
func turnAccount(ctx context.Context, store opStore, turn turnframe.TurnID) (turnframe.AccountID, error) {
	return store.turnAccount(ctx, turn)
}

// historyPage is how many records one History call reads, and so the most
// a command holds at once. A variable, so tests can page through a long
// trail with small pages.
var historyPage = 1000

// eachHistoryPage hands subject's history to fn a page at a time, oldest
// first.
func eachHistoryPage(ctx context.Context, store turnframe.HistoryStore, subject turnframe.Subject, fn func([]turnframe.HistoryRecord) error) error {
	var after int64
	for {
		page, err := store.History(ctx, subject, after, historyPage)
		if err != nil {
			return fmt.Errorf("history of %s %s: %w", subject.Kind, subject.Ref, err)
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < historyPage {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// historyColumns are the columns of a history table.
var historyColumns = []string{"AT", "MOVE", "ACTOR", "ATTEMPT", "CODE", "REF", "NOTE"}

// printHistory writes subject's history as a table, a page at a time:
// each page is aligned on its own, and a trail without records says so.
func printHistory(ctx context.Context, w io.Writer, store turnframe.HistoryStore, subject turnframe.Subject) error {
	n := 0
	err := eachHistoryPage(ctx, store, subject, func(page []turnframe.HistoryRecord) error {
		rows := make([][]string, 0, len(page))
		for _, r := range page {
			rows = append(rows, historyRow(r))
		}
		var header []string
		if n == 0 {
			header = historyColumns
		}
		n += len(page)
		return writeRows(w, header, rows)
	})
	if err == nil && n == 0 {
		_, err = fmt.Fprintln(w, "(no records)")
	}
	return err
}

// historyRow is one record as a table row. MOVE is "from → to", "→ to" for
// the record that created the subject, and "evidence (at STATUS)" for a
// record that moved nothing.
func historyRow(r turnframe.HistoryRecord) []string {
	return []string{stamp(r.At), moveText(r), string(r.Actor), r.Attempt, r.Code, r.RemoteRef, r.Note}
}

func moveText(r turnframe.HistoryRecord) string {
	switch {
	case r.Evidence:
		return "evidence (at " + r.To + ")"
	case r.From == "":
		return "→ " + r.To
	}
	return r.From + " → " + r.To
}

// historyJSON is one audit record as --json prints it.
type historyJSON struct {
	Seq       int64    `json:"seq"`
	Subject   string   `json:"subject"` // journal, outbox or turn
	Account   string   `json:"account"`
	Ref       string   `json:"ref"` // the key, the row id or the turn id
	At        jsonTime `json:"at"`
	From      string   `json:"from"` // "" when the record created the subject
	To        string   `json:"to"`
	Evidence  bool     `json:"evidence"` // it moved nothing
	Actor     string   `json:"actor"`
	Attempt   string   `json:"attempt,omitempty"`
	Code      string   `json:"code,omitempty"`
	RemoteRef string   `json:"remote_ref,omitempty"`
	Note      string   `json:"note,omitempty"`
}

func historyView(r turnframe.HistoryRecord) historyJSON {
	return historyJSON{
		Seq: r.Seq, Subject: r.Kind.String(), Account: string(r.Account), Ref: r.Ref, At: at(r.At),
		From: r.From, To: r.To, Evidence: r.Evidence, Actor: string(r.Actor), Attempt: r.Attempt,
		Code: r.Code, RemoteRef: r.RemoteRef, Note: r.Note,
	}
}

// streamHistoryJSON writes subject's history into arr, a page at a time.
func streamHistoryJSON(ctx context.Context, arr *jsonArray, store turnframe.HistoryStore, subject turnframe.Subject) error {
	return eachHistoryPage(ctx, store, subject, func(page []turnframe.HistoryRecord) error {
		for _, r := range page {
			if err := arr.add(historyView(r)); err != nil {
				return err
			}
		}
		return nil
	})
}
