package main

import (
	"context"
	"flag"

	"github.com/turnframe/turnframe"
)

func turnsCommand() *command {
	return &command{
		name:    "turns",
		summary: "list turns; --unfinished: the ones recovery still has to act on",
		help: `Lists turns, oldest first, read through the read pool. With --unfinished it
lists what the application's Recover would visit: turns that are not
delivered or abandoned, and finished turns that still hold a command whose
outcome is unknown or needs intervention; the RECOVERY column is what
Recovery.Decide says each one needs (resume_commands, regenerate_response,
reconcile_external, …), read with Recovery.Triage: the decision alone,
without the events a regeneration would read.

Turns are read 100 at a time and printed as they are read, so the table's
columns are aligned per 100 turns and --json streams one array; no more than
one page is ever held. --limit (at most 10000) bounds the listing; when turns
remain past it, a "more:" line on stderr gives the --after to read on with.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			unfinished := fs.Bool("unfinished", false, "only turns recovery still has to act on, with its decision")
			account := fs.String("account", "", "only turns of this `account`")
			limit := fs.Int("limit", 100, "at most this many turns (1–10000)")
			after := fs.String("after", "", "only turns whose id sorts after this `id` (the \"more:\" line gives it)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if err := checkListLimit(*limit); err != nil {
					return err
				}
				if *after != "" {
					if _, err := turnframe.ParseTurnID(*after); err != nil {
						return usagef("--after %q is not a turn id", *after)
					}
				}
				acct := turnframe.AccountID(*account)
				if acct != "" {
					if err := acct.Validate(); err != nil {
						return usagef("--account: %v", err)
					}
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				read := func(ctx context.Context, after string, n int) ([]turnJSON, error) {
					return allTurns(ctx, store, acct, after, n)
				}
				header := []string{"TURN", "ACCOUNT", "PHASE", "UPDATED", "AGE"}
				if *unfinished {
					read = func(ctx context.Context, after string, n int) ([]turnJSON, error) {
						return unfinishedTurns(ctx, store, acct, after, n)
					}
					header = append(header, "RECOVERY")
				}
				out := newListOutput(e.stdout, header, *asJSON)
				now := e.now()
				next, err := pageThrough(ctx, e, *limit, *after, read, func(t turnJSON) string { return t.ID },
					func(page []turnJSON) error {
						rows, views := make([][]string, 0, len(page)), make([]any, 0, len(page))
						for _, t := range page {
							row := []string{t.ID, t.Account, t.Phase, stamp(t.UpdatedAt.Time), age(now, t.UpdatedAt.Time)}
							if *unfinished {
								row = append(row, t.Recovery)
							}
							rows, views = append(rows, row), append(views, t)
						}
						return out.page(rows, views)
					})
				if err != nil {
					return err
				}
				if err := out.close(); err != nil {
					return err
				}
				moreHint(e, "turns", next)
				return nil
			}
		},
	}
}

// turnJSON is a turn as "turns --json" prints it.
type turnJSON struct {
	ID           string   `json:"id"`
	Account      string   `json:"account"`
	Conversation string   `json:"conversation"`
	Phase        string   `json:"phase"`
	UpdatedAt    jsonTime `json:"updated_at"`
	Recovery     string   `json:"recovery,omitempty"` // --unfinished: what recovery decided
}

// unfinishedTurns lists at most limit of the turns a recovery sweep would
// visit, after the turn with id after (if any), each with the decision
// Recovery.Decide makes for it, read with Recovery.Triage: the kind is all
// it prints, and Decide would read every event of a turn to be answered
// again, data and all.
func unfinishedTurns(ctx context.Context, store opStore, account turnframe.AccountID, after string, limit int) ([]turnJSON, error) {
	scope := turnframe.RecoveryScope{Account: account}
	scope.After, _ = turnframe.ParseTurnID(after) // checked, or a turn's own id; "" is the zero id
	markers, err := store.ListUnfinishedTurns(ctx, scope, limit)
	if err != nil {
		return nil, err
	}
	rec := turnframe.NewRecovery(store)
	out := make([]turnJSON, 0, len(markers))
	for _, m := range markers {
		t := turnJSON{ID: m.Turn.String(), Account: string(m.Account), Conversation: m.Conversation.String(),
			Phase: m.Phase.String(), UpdatedAt: at(m.UpdatedAt)}
		action, err := rec.Triage(ctx, m.Account, m.Turn)
		if err != nil {
			return nil, err
		}
		t.Recovery = action.Kind.String()
		out = append(out, t)
	}
	return out, nil
}

// allTurns lists at most limit turns oldest first, after the turn with id
// after (if any), with the operator read listTurns: the store's API lists
// only unfinished ones.
func allTurns(ctx context.Context, store opStore, account turnframe.AccountID, after string, limit int) ([]turnJSON, error) {
	cursor, _ := turnframe.ParseTurnID(after) // checked, or a turn's own id; "" is the zero id
	markers, err := store.listTurns(ctx, account, cursor, limit)
	if err != nil {
		return nil, err
	}
	out := make([]turnJSON, 0, len(markers))
	for _, m := range markers {
		out = append(out, turnJSON{ID: m.Turn.String(), Account: string(m.Account), Conversation: m.Conversation.String(),
			Phase: m.Phase.String(), UpdatedAt: at(m.UpdatedAt)})
	}
	return out, nil
}
