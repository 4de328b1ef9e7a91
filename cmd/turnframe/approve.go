package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/turnframe/turnframe"
)

func approveCommand() *command { return approvalCommand(true) }

func denyCommand() *command { return approvalCommand(false) }

// approvalCommand is 'approve' (approve true) or 'deny': both move a
// command awaiting approval, through Runtime.Approve or Runtime.Deny.
func approvalCommand(approve bool) *command {
	c := &command{
		name:    "approve",
		args:    "--account A KEY",
		summary: "approve a command that awaits approval: the next Execute of its turn runs it",
		help: `Approves the command the account admitted under KEY, which awaits approval
(the application planned it with NeedsApproval: a payment an agent proposed).
Its journal entry moves from awaiting_approval to pending (code
turnframe.approval.approved), and the next Execute of its turn — or the
application's Recover, which resumes it — runs it under its key, even when
the turn's answer went out already. The move and its audit record (actor and
note: 'turnframe history --account A KEY') are one immediate transaction.
'turnframe approvals' lists what awaits approval. An entry that is not
awaiting approval, or one whose turn was abandoned (deny it), is refused
(exit 2), unchanged.`,
	}
	if !approve {
		c.name = "deny"
		c.summary = "deny a command that awaits approval: it is rejected and never runs"
		c.help = `Denies the command the account admitted under KEY, which awaits approval: its
journal entry moves from awaiting_approval to rejected with the stable code
turnframe.approval.denied, and it never runs. The move and its audit record
(actor and note) are one immediate transaction. 'turnframe approvals' lists
what awaits approval. An entry that is not awaiting approval is refused
(exit 2), unchanged.`
	}
	c.flags = func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		db := addDBFlags(fs)
		account := fs.String("account", "", "the `account` that admitted the command (required)")
		note := fs.String("note", "", "why, in a few words, for the audit trail (at most 1024 bytes)")
		actor := fs.String("actor", string(turnframe.ActorOperator), "who decides, as the audit trail records it (like operator:alice)")
		return func(ctx context.Context, e *env, args []string) error {
			acct, key, who, err := parseApproval(args, *account, *actor, *note)
			if err != nil {
				return err
			}
			store, err := db.open(ctx, e)
			if err != nil {
				return err
			}
			defer store.Close()
			before, err := store.ByKey(ctx, acct, key)
			if err != nil {
				return noEntry(acct, key, err)
			}
			rt := turnframe.New(store, turnframe.WithClock(e.now), turnframe.WithLogger(warnLogger(e.stderr)))
			decide, verb, next := rt.Approve, "approved", "the next Execute of its turn runs it"
			if !approve {
				decide, verb, next = rt.Deny, "denied", "it never runs"
			}
			after, err := decide(ctx, acct, key, who, *note)
			if err != nil {
				return explainWrite(err, db)
			}
			out := confirm(e, "'turnframe history --account "+cell(string(acct))+" "+cell(string(key))+"'")
			fmt.Fprintf(out, "%s journal entry %s (account %s, command %s, turn %s): %s → %s by %s (code %s); %s\n", verb,
				cell(string(key)), cell(string(acct)), cell(before.Name), after.Turn, before.Status, after.Status, cell(string(who)),
				cell(after.Code), next)
			return out.done()
		}
	}
	return c
}

// parseApproval checks an approve or deny command line before anything is
// opened.
func parseApproval(args []string, account, actor, note string) (turnframe.AccountID, turnframe.IdempotencyKey, turnframe.Actor, error) {
	acct := turnframe.AccountID(account)
	if account == "" {
		return "", "", "", usagef("--account is required: the account that admitted the command")
	}
	if err := acct.Validate(); err != nil {
		return "", "", "", usagef("--account: %v", err)
	}
	if len(args) != 1 {
		return "", "", "", usagef("give one KEY, the command's idempotency key")
	}
	key := turnframe.IdempotencyKey(args[0])
	if err := key.ValidateStored(); err != nil {
		return "", "", "", usagef("%q is not an idempotency key: %v", args[0], err)
	}
	who := turnframe.Actor(actor)
	if err := who.Validate(); err != nil {
		return "", "", "", usagef("--actor: %v", err)
	}
	if !who.MayIntervene() {
		return "", "", "", usagef("--actor %q may not approve or deny: name the person deciding (like %q)", actor, "operator:alice")
	}
	if len(note) > turnframe.MaxNoteLen {
		return "", "", "", usagef("--note is %d bytes; at most %d", len(note), turnframe.MaxNoteLen)
	}
	return acct, key, who, nil
}

func approvalsCommand() *command {
	return &command{
		name:    "approvals",
		summary: "list the commands that await approval, oldest first",
		help: `Lists the journal entries awaiting approval — commands the application planned
with NeedsApproval that nobody approved or denied yet — oldest first (at most
100), read through the read pool. Approve one with 'turnframe approve
--account A KEY', deny it with 'turnframe deny --account A KEY'. Such a command
never runs before it is approved; recovery lists its turn and leaves it. An
entry whose turn was abandoned is listed too: it can only be denied (approve
refuses it), unless a new turn admits its key and adopts it, still awaiting.`,
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
				list, n, err := uncertainEntries(ctx, store, turnframe.JournalAwaitingApproval)
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(e.stdout, approvalsJSON{Count: n, Entries: list})
				}
				if _, err := fmt.Fprintf(e.stdout, "%d journal entries await approval ('turnframe approve|deny --account A KEY'):\n", n); err != nil {
					return err // its only line, with none awaiting: never done with nothing written
				}
				if len(list) == 0 {
					return nil
				}
				return writeAwaitingEntries(e, list)
			}
		},
	}
}

// approvalsJSON is what "approvals" reports.
type approvalsJSON struct {
	Count   int           `json:"count"`   // entries awaiting approval
	Entries []statusEntry `json:"entries"` // the first of them (at most 100), oldest first
}

func writeAwaitingEntries(e *env, list []statusEntry) error {
	var rows [][]string
	for _, j := range list {
		rows = append(rows, []string{j.Account, j.Key, j.Name, j.Case, j.Turn, stamp(j.UpdatedAt.Time)})
	}
	return writeTable(e.stdout, []string{"ACCOUNT", "KEY", "COMMAND", "CASE", "TURN", "SINCE"}, rows)
}
