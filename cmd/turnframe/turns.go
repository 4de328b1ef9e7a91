package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
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
reconcile_external, …).`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			unfinished := fs.Bool("unfinished", false, "only turns recovery still has to act on, with its decision")
			account := fs.String("account", "", "only turns of this `account`")
			limit := fs.Int("limit", 100, "at most this many turns (1–10000)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if err := turnframe.CheckLimit("limit", *limit); err != nil {
					return usagef("--limit %d is not between 1 and %d", *limit, turnframe.MaxLimit)
				}
				acct := turnframe.AccountID(*account)
				if acct != "" {
					if err := acct.Validate(); err != nil {
						return usagef("--account: %v", err)
					}
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				var turns []turnJSON
				if *unfinished {
					turns, err = unfinishedTurns(ctx, store, acct, *limit)
				} else {
					turns, err = allTurns(ctx, store, acct, *limit)
				}
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(e.stdout, turns)
				}
				now := e.now()
				header := []string{"TURN", "ACCOUNT", "PHASE", "UPDATED", "AGE"}
				if *unfinished {
					header = append(header, "RECOVERY")
				}
				rows := make([][]string, 0, len(turns))
				for _, t := range turns {
					row := []string{t.ID, t.Account, t.Phase, stamp(t.UpdatedAt.Time), age(now, t.UpdatedAt.Time)}
					if *unfinished {
						row = append(row, t.Recovery)
					}
					rows = append(rows, row)
				}
				return writeTable(e.stdout, header, rows)
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

// unfinishedTurns lists the turns a recovery sweep would visit, each with
// the decision Recovery.Decide makes for it (reading only).
func unfinishedTurns(ctx context.Context, store *sqlitestore.Store, account turnframe.AccountID, limit int) ([]turnJSON, error) {
	markers, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: account}, limit)
	if err != nil {
		return nil, err
	}
	rec := turnframe.NewRecovery(store)
	out := make([]turnJSON, 0, len(markers))
	for _, m := range markers {
		t := turnJSON{ID: m.Turn.String(), Account: string(m.Account), Conversation: m.Conversation.String(),
			Phase: m.Phase.String(), UpdatedAt: at(m.UpdatedAt)}
		action, err := rec.Decide(ctx, m.Account, m.Turn)
		if err != nil {
			return nil, err
		}
		t.Recovery = action.Kind.String()
		out = append(out, t)
	}
	return out, nil
}

// allTurns lists turns oldest first with read-only SQL: the store's API
// lists only unfinished ones.
func allTurns(ctx context.Context, store *sqlitestore.Store, account turnframe.AccountID, limit int) ([]turnJSON, error) {
	query := "SELECT id, account, conversation, phase, updated_at FROM turns"
	args := []any{}
	if account != "" {
		query += " WHERE account = ?"
		args = append(args, string(account))
	}
	query += " ORDER BY id LIMIT ?"
	args = append(args, limit)
	rows, err := store.ReadDB().QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	defer rows.Close()
	out := []turnJSON{}
	for rows.Next() {
		var t turnJSON
		var us int64
		if err := rows.Scan(&t.ID, &t.Account, &t.Conversation, &t.Phase, &us); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		t.UpdatedAt = at(time.UnixMicro(us).UTC())
		out = append(out, t)
	}
	return out, rows.Err()
}
