package main

import (
	"context"
	"flag"

	"github.com/turnframe/turnframe"
)

func outboxCommand() *command {
	return &command{
		name:    "outbox",
		summary: "list outbox rows, oldest first",
		help: `Lists outbox rows in enqueue order, oldest first, read through the read pool.
--status keeps one status (pending, dispatching, completed, failed,
outcome_unknown, needs_intervention); --account keeps one tenant. ATTEMPTS
counts every attempt, BASE the ones made before the row's last requeue (the
dispatcher allows a full budget beyond it); DUE is shown for pending rows,
LEASE UNTIL for dispatching ones. A cell holding a control character prints as a quoted Go
string, so no stored value can forge a row.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			status := fs.String("status", "", "only rows in this `status`")
			account := fs.String("account", "", "only rows of this `account`")
			limit := fs.Int("limit", 100, "at most this many rows (1–10000)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				filter := turnframe.OutboxFilter{Account: turnframe.AccountID(*account), Limit: *limit}
				if *status != "" {
					s, err := turnframe.ParseOutboxStatus(*status)
					if err != nil {
						return usagef("--status %q is not an outbox status (pending, dispatching, completed, failed, outcome_unknown, needs_intervention)", *status)
					}
					filter.Status = s
				}
				if err := turnframe.CheckLimit("limit", *limit); err != nil {
					return usagef("--limit %d is not between 1 and %d", *limit, turnframe.MaxLimit)
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				rows, err := store.ListOutbox(ctx, filter)
				if err != nil {
					return err
				}
				if *asJSON {
					out := make([]outboxJSON, 0, len(rows))
					for _, r := range rows {
						out = append(out, outboxView(r))
					}
					return writeJSON(e.stdout, out)
				}
				table := make([][]string, 0, len(rows))
				for _, r := range rows {
					table = append(table, outboxRow(r))
				}
				return writeTable(e.stdout, outboxColumns, table)
			}
		},
	}
}
