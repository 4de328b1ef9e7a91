package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/turnframe/turnframe"
)

func settleCommand() *command {
	return &command{
		name:    "settle",
		args:    "ID VERDICT | --account A KEY VERDICT",
		summary: "settle an outcome_unknown or needs_intervention outbox row or journal entry, once you know",
		help: `Settles an effect whose outcome is unknown, once you have found out from the
remote system what happened to it (I15: turnframe never sends or runs it again
blindly): the outbox row with this ID, or, with --account, the command that
account admitted under KEY (its journal entry). VERDICT is one of

  completed  the remote has it: the row is completed, the command committed
  failed     the remote does not have it and never will: the row is failed,
             the command rejected (with --code)
  resend     the remote certainly never received it (or still remembers its
             key): the row is pending again, due now, and the next dispatch
             sends it under the same key; the command is pending again, and
             the next Execute of its turn runs it under the same key
  escalate   an outcome_unknown one needs someone else to decide: it becomes
             needs_intervention

It settles outcome_unknown and needs_intervention rows and entries (what the
application's Recovery.Recover left to a person: 'turnframe status' lists
them), and a command left executing on an abandoned turn once its attempt's
lease ended (completed or failed), through Recovery.Settle, the one settle
path: the move and its audit record ('turnframe history') are one immediate
transaction, which waits up to --busy-timeout for the application's writes.
With --attempt, it settles only what you looked at: a row or entry sent again
since then, at another attempt, is refused (exit 2), its new outcome unseen.
For a row, --attempt is its attempt number ("attempts:" of 'turnframe show
ID', the ATTEMPTS column of 'turnframe outbox'); for a journal entry, its
attempt id (the ATTEMPT ID column of the journal table 'turnframe show TURN'
prints, or "attempt" in 'turnframe show --json TURN'). Without --attempt it
settles the attempt it reads just before its write, so at least a send made
between that read and the write is refused. Only a person or the
application may settle what needs intervention, so --actor may not be
"recovery", "policy" or "worker:…". Anything else — a row
or entry in another status, a resend of a command whose turn was abandoned —
is refused (exit 2), unchanged.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			account := fs.String("account", "", "settle the journal entry this `account` admitted under KEY, instead of an outbox row")
			code := fs.String("code", "", "the reason `code` kept on the row or entry (default: operator.VERDICT)")
			ref := fs.String("ref", "", "the remote system's `reference` for the effect, if it gave one")
			note := fs.String("note", "", "why, in a few words, for the audit trail (at most 1024 bytes)")
			actor := fs.String("actor", string(turnframe.ActorOperator), "who decides, as the audit trail records it (like operator:alice)")
			attempt := fs.String("attempt", "", "settle only if the row or entry is still at this `attempt`: a row's attempts, an entry's ATTEMPT ID ('turnframe show')")
			return func(ctx context.Context, e *env, args []string) error {
				req, err := parseSettle(args, settleFlags{account: *account, code: *code, ref: *ref, note: *note, actor: *actor, attempt: *attempt})
				if err != nil {
					return err
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now), turnframe.WithLogger(warnLogger(e.stderr)))
				if req.entry {
					return settleEntry(ctx, e, store, rec, req, db)
				}
				return settleRow(ctx, e, store, rec, req, db)
			}
		},
	}
}

// settleFlags are settle's flags as given.
type settleFlags struct {
	account, code, ref, note, actor, attempt string
}

// settleRequest is a settle command line, checked.
type settleRequest struct {
	entry    bool // a journal entry (account and key), not an outbox row
	id       turnframe.OutboxID
	account  turnframe.AccountID
	key      turnframe.IdempotencyKey
	decision turnframe.Decision
}

// parseSettle checks a settle command line before anything is opened.
func parseSettle(args []string, f settleFlags) (settleRequest, error) {
	var req settleRequest
	if f.account != "" {
		req.entry, req.account = true, turnframe.AccountID(f.account)
		if err := req.account.Validate(); err != nil {
			return req, usagef("--account: %v", err)
		}
		if len(args) == 0 {
			return req, usagef("missing the key of the command to settle")
		}
		req.key = turnframe.IdempotencyKey(args[0])
		if err := req.key.ValidateStored(); err != nil {
			return req, usagef("%q is not an idempotency key: %v", args[0], err)
		}
	} else {
		id, err := parseOutboxID(args, "the id of an outbox row (or --account A KEY for a journal entry)")
		if err != nil {
			return req, err
		}
		req.id = id
	}
	if len(args) < 2 {
		return req, usagef("missing the verdict: completed, failed, resend or escalate")
	}
	if len(args) > 2 {
		return req, usagef("unexpected argument %q", args[2])
	}
	v, err := turnframe.ParseVerdict(args[1])
	if err != nil || v == turnframe.VerdictUnresolved {
		return req, usagef("%q is not a verdict: completed, failed, resend or escalate", args[1])
	}
	actor := turnframe.Actor(f.actor)
	if err := actor.Validate(); err != nil {
		return req, usagef("--actor: %v", err)
	}
	if !actor.MayIntervene() {
		return req, usagef("--actor %q may not settle by hand: %q, %q and %q are turnframe's own recovery, policy and dispatch workers; "+
			"name the person deciding (like %q)", f.actor, turnframe.ActorRecovery, turnframe.ActorPolicy, "worker:…", "operator:alice")
	}
	code := f.code
	if code == "" {
		code = "operator." + v.String()
	}
	if err := turnframe.CheckCode("code", code); err != nil {
		return req, usagef("--code: %v", err)
	}
	if len(f.ref) > turnframe.MaxRemoteRefLen {
		return req, usagef("--ref is %d bytes; at most %d", len(f.ref), turnframe.MaxRemoteRefLen)
	}
	if len(f.note) > turnframe.MaxNoteLen {
		return req, usagef("--note is %d bytes; at most %d", len(f.note), turnframe.MaxNoteLen)
	}
	req.decision = turnframe.Decision{Verdict: v, Code: code, RemoteRef: f.ref, Actor: actor, Note: f.note, Attempt: f.attempt}
	return req, nil
}

// settleRow settles an outbox row through Recovery.Settle, under the
// account read from the row itself.
func settleRow(ctx context.Context, e *env, store opStore, rec *turnframe.Recovery, req settleRequest, db *dbFlags) error {
	before, err := store.GetOutbox(ctx, req.id)
	if err != nil {
		return noRow(req.id, err)
	}
	subject := turnframe.OutboxSubject(before.Account, req.id)
	seen, err := lastHistorySeq(ctx, store, subject)
	if err != nil {
		return fmt.Errorf("reading the history of outbox row %s (nothing was settled): %w", req.id, err)
	}
	if req.decision.Attempt == "" && before.Attempts > 0 {
		req.decision.Attempt = strconv.Itoa(before.Attempts) // the attempt read: a send since is not settled blind
	}
	if err := rec.Settle(ctx, subject, req.decision); err != nil {
		return explainWrite(err, db)
	}
	// Should the history not say, what the decision itself wrote: never the
	// row read back after the write, which may show a later send.
	def := turnframe.HistoryRecord{From: before.Status.String(), To: movesTo(subject, req.decision.Verdict),
		Code: req.decision.Code, RemoteRef: req.decision.RemoteRef}
	if _, err := store.GetOutbox(ctx, req.id); errors.Is(err, turnframe.ErrNotFound) {
		def.To = prunedAs(req.decision.Verdict)
	}
	m := moveMade(ctx, store, subject, req.decision, seen, def)
	out := confirm(e, "'turnframe history "+req.id.String()+"'")
	fmt.Fprintf(out, "settled outbox row %s (account %s, %s): %s → %s by %s%s\n", req.id, cell(string(before.Account)),
		cell(before.Destination), m.From, m.To, cell(string(req.decision.Actor)), settledDetail(m.Code, m.RemoteRef))
	return out.done()
}

// moveMade returns the first record in subject's history after seen (the
// last record before the settle), evidence aside, of the move d made: by
// d's actor, with d's code and note, to the status d's verdict leads to.
// The settle was fenced on the attempt read before seen, so an identical
// move that landed after seen and before it would have made it refused
// (the subject no longer unknown, or sent again). Its statuses, code and
// reference are those the settlement that just landed left, which may not
// be the ones read around it (recovery may have moved it before, a
// dispatcher claimed and settled it after, another operator under the
// same actor settled it again); a move by another actor, or with another
// code, note or verdict, is not it. def, if the history says nothing.
func moveMade(ctx context.Context, store turnframe.HistoryStore, subject turnframe.Subject, d turnframe.Decision, seen int64, def turnframe.HistoryRecord) turnframe.HistoryRecord {
	actor := d.Actor
	if actor == "" {
		actor = turnframe.ActorApp
	}
	found := errors.New("found")
	_ = eachHistoryPage(ctx, store, subject, func(page []turnframe.HistoryRecord) error {
		for _, h := range page {
			// The first matching move written after the settle's own read:
			// an identical decision made later (by another person under the
			// same actor, at a later attempt) is not this one.
			if h.Seq > seen && !h.Evidence && h.Actor == actor && h.Code == d.Code && h.Note == d.Note && h.To == movesTo(subject, d.Verdict) {
				def = h
				return found
			}
		}
		return nil
	})
	return def
}

// movesTo is the status verdict v moves subject to, as its history names
// it: another operator's escalation under the same code is not a
// completion.
func movesTo(subject turnframe.Subject, v turnframe.Verdict) string {
	if subject.Kind == turnframe.SubjectJournal {
		s, _ := v.JournalStatus()
		return s.String()
	}
	s, _ := v.OutboxStatus()
	return s.String()
}

// lastHistorySeq is the sequence number of the last record of subject's
// history (0 if none). A history that cannot be read is an error: with 0,
// moveMade would take the oldest identical move for this one.
func lastHistorySeq(ctx context.Context, store turnframe.HistoryStore, subject turnframe.Subject) (int64, error) {
	var last int64
	err := eachHistoryPage(ctx, store, subject, func(page []turnframe.HistoryRecord) error {
		last = page[len(page)-1].Seq
		return nil
	})
	return last, err
}

// settleEntry settles a journal entry through Recovery.Settle.
func settleEntry(ctx context.Context, e *env, store opStore, rec *turnframe.Recovery, req settleRequest, db *dbFlags) error {
	before, err := store.ByKey(ctx, req.account, req.key)
	if err != nil {
		return noEntry(req.account, req.key, err)
	}
	subject := turnframe.JournalSubject(req.account, req.key)
	seen, err := lastHistorySeq(ctx, store, subject)
	if err != nil {
		return fmt.Errorf("reading the history of journal entry %s (nothing was settled): %w", cell(string(req.key)), err)
	}
	if req.decision.Attempt == "" && !before.Attempt.IsZero() {
		req.decision.Attempt = before.Attempt.String() // the attempt read: a run since is not settled blind
	}
	if err := rec.Settle(ctx, subject, req.decision); err != nil {
		return explainWrite(err, db)
	}
	// The settlement landed: a read of the entry after it that fails only
	// loses the turn it names now (a new turn may have adopted it), never
	// the settlement, which the command reports as done.
	turn := before.Turn
	if after, err := store.ByKey(ctx, req.account, req.key); err == nil {
		turn = after.Turn
	} else {
		fmt.Fprintf(e.stderr, "turnframe settle: warning: settled journal entry %s, but reading it back failed (the turn named is the one read before): %v\n",
			cell(string(req.key)), err)
	}
	m := moveMade(ctx, store, subject, req.decision, seen,
		turnframe.HistoryRecord{From: before.Status.String(), To: movesTo(subject, req.decision.Verdict), Code: req.decision.Code, RemoteRef: req.decision.RemoteRef})
	out := confirm(e, "'turnframe history --account "+cell(string(req.account))+" "+cell(string(req.key))+"'")
	fmt.Fprintf(out, "settled journal entry %s (account %s, command %s, turn %s): %s → %s by %s%s\n", cell(string(req.key)),
		cell(string(req.account)), cell(before.Name), turn, m.From, m.To, cell(string(req.decision.Actor)),
		settledDetail(m.Code, m.RemoteRef))
	return out.done()
}

// prunedAs is what settleRow prints as the status a row went to when the
// row was gone by the time it was read back: only a finished row is
// pruned, and only a completed or failed verdict finishes one.
func prunedAs(v turnframe.Verdict) string {
	if to, _ := v.OutboxStatus(); to.IsFinished() {
		return to.String() + " (pruned since)"
	}
	return "(gone since)"
}

// settledDetail is the code and reference a settlement left, for its line.
func settledDetail(code, ref string) string {
	s := ""
	if code != "" {
		s += " (code " + cell(code)
	}
	if ref != "" {
		if s == "" {
			s += " ("
		} else {
			s += ", "
		}
		s += "ref " + cell(ref)
	}
	if s != "" {
		s += ")"
	}
	return s
}

// warnLogger is the logger of the library calls a command makes: warnings
// and errors, to the command's stderr.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func requeueCommand() *command {
	return &command{
		name:    "requeue",
		args:    "ID",
		summary: "send a failed outbox row again",
		help: `Moves a failed outbox row back to pending, due now, so the next dispatch sends
it again under the same idempotency key: for a row the remote refused that
you have since fixed (or that ran out of attempts). It gets a fresh attempt
budget: the dispatcher allows it as many attempts again as a new row, while
its attempt count keeps rising (its attempt base becomes its attempts so
far). A row in any other status is refused (exit 2), unchanged. A row with an
order key goes out at once, after the later rows of its key that went out
when it failed, even while one of them is still being sent.

With --attempt N (the row's attempts, as 'turnframe show ID' prints them),
it requeues only what you looked at: a row no longer failed, or failed again
at another attempt (requeued and sent again since), is refused (exit 2),
unchanged. The store checks it in the requeue's own transaction, so of two
operators requeuing the same row at once, one is refused. Without --attempt
the requeue is still fenced on the row as this command reads it just before,
so what it prints is what it moved.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			attempt := fs.String("attempt", "", "requeue only if the row is still failed at `N` attempts ('turnframe show ID' prints them)")
			return func(ctx context.Context, e *env, args []string) error {
				id, err := parseOutboxID(args, "the id of an outbox row")
				if err != nil {
					return err
				}
				if len(args) > 1 {
					return usagef("unexpected argument %q", args[1])
				}
				fence, err := parseRequeueFence(*attempt, "--attempt")
				if err != nil {
					return err
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				before, err := store.GetOutbox(ctx, id)
				if err != nil {
					return noRow(id, err)
				}
				if err := fence.check(before); err != nil {
					return explainWrite(err, db)
				}
				if err := requeuable(before); err != nil {
					return explainWrite(err, db)
				}
				if err := store.Requeue(ctx, id, before.Attempts, e.now()); err != nil {
					return explainWrite(err, db)
				}
				out := confirm(e, "'turnframe show "+id.String()+"'")
				fmt.Fprintf(out, "requeued %s: failed (%s) → pending, due now, with a fresh attempt budget after %d attempt(s)\n",
					id, cell(before.LastCode), before.Attempts)
				return out.done()
			}
		},
	}
}

// requeueFence is the attempts a requeue was decided at: the row must still
// be failed at that many attempts. check words a refusal on the row as
// read; the store's Requeue, handed the same attempts, enforces it in its
// own transaction.
type requeueFence struct {
	attempts int
	set      bool // false: no fence, the store's own rule alone (failed)
}

// parseRequeueFence parses the attempts a requeue was decided at ("": no
// fence); what names where it came from, for the usage error.
func parseRequeueFence(s, what string) (requeueFence, error) {
	if s == "" {
		return requeueFence{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return requeueFence{}, usagef("%s %q is not a number of attempts", what, s)
	}
	return requeueFence{attempts: n, set: true}, nil
}

// check refuses, with turnframe.ErrConflict, to requeue rec unless it is
// still failed at the fence's attempts: a row sent again since the operator
// looked, or settled otherwise, is not sent once more on a stale look.
func (f requeueFence) check(rec turnframe.OutboxRecord) error {
	switch {
	case !f.set:
		return nil
	case rec.Status != turnframe.OutboxFailed:
		return fmt.Errorf("outbox row %s is %s, no longer failed: only a failed row is requeued: %w", rec.ID, rec.Status, turnframe.ErrConflict)
	case rec.Attempts != f.attempts:
		return fmt.Errorf("outbox row %s is at attempt %d, not %d: it was sent again since it was looked at: %w",
			rec.ID, rec.Attempts, f.attempts, turnframe.ErrConflict)
	}
	return nil
}

// requeuable refuses, with turnframe.ErrConflict, a row read as not
// failed. Besides saying so before any write, it keeps the fence the
// requeue hands the store one: a failed row has had at least one attempt,
// and 0 attempts would be no fence at all.
func requeuable(rec turnframe.OutboxRecord) error {
	if rec.Status != turnframe.OutboxFailed {
		return fmt.Errorf("outbox row %s is %s: only a failed row is requeued: %w", rec.ID, rec.Status, turnframe.ErrConflict)
	}
	return nil
}

// explainWrite words a refused operator write: a row or entry whose status
// the store's rule refuses (the error names it), or a database that stayed
// busy.
func explainWrite(err error, db *dbFlags) error {
	if errors.Is(err, turnframe.ErrConflict) {
		// The store's rule refused the move; its error names the status.
		return fmt.Errorf("refused, nothing changed (look with 'turnframe show' or 'turnframe history'): %w", err)
	}
	return describeBusy(err, db.busy)
}
