package main

import (
	"context"
	"errors"
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
counts every attempt, BASE the ones outside its budget: made before the
row's last requeue, or claims put back unsent (the dispatcher allows a full
budget beyond it); DUE is shown for pending rows,
LEASE UNTIL for dispatching ones. A cell holding a control or format character prints as a quoted Go
string, so no stored value can forge a row.

--after goes on after the row with that id; when that row no longer exists
(the application pruned it since it was printed), after the place its id
names: ids are made in time order, so the listing goes on with the rows
enqueued after it — but for rows enqueued at the same moment by two writers,
which may be listed twice or skipped there.

Rows are read 100 at a time and printed as they are read, so the table's
columns are aligned per 100 rows and --json streams one array; no more than
one page is ever held. --limit (at most 10000) bounds the listing; when rows
remain past it, a "more:" line on stderr gives the --after to read on with.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			status := fs.String("status", "", "only rows in this `status`")
			account := fs.String("account", "", "only rows of this `account`")
			limit := fs.Int("limit", 100, "at most this many rows (1–10000)")
			after := fs.String("after", "", "only rows enqueued after the row with this `id` (the \"more:\" line gives it)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				filter := turnframe.OutboxFilter{Account: turnframe.AccountID(*account)}
				if *status != "" {
					s, err := turnframe.ParseOutboxStatus(*status)
					if err != nil {
						return usagef("--status %q is not an outbox status (pending, dispatching, completed, failed, outcome_unknown, needs_intervention)", *status)
					}
					filter.Status = s
				}
				if err := checkListLimit(*limit); err != nil {
					return err
				}
				if *after != "" {
					if _, err := turnframe.ParseOutboxID(*after); err != nil {
						return usagef("--after %q is not an outbox row id", *after)
					}
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				out := newListOutput(e.stdout, outboxColumns, *asJSON)
				next, err := pageThrough(ctx, e, *limit, *after,
					func(ctx context.Context, after string, n int) ([]turnframe.OutboxRecord, error) {
						f := filter
						f.Limit = n
						f.After, _ = turnframe.ParseOutboxID(after) // checked above, or a row's own id; "" is the zero id
						return listOutbox(ctx, store, f)
					},
					func(r turnframe.OutboxRecord) string { return r.ID.String() },
					func(page []turnframe.OutboxRecord) error {
						rows, views := make([][]string, 0, len(page)), make([]any, 0, len(page))
						for _, r := range page {
							rows, views = append(rows, outboxRow(r)), append(views, outboxView(r))
						}
						return out.page(rows, views)
					})
				if err != nil {
					return err
				}
				if err := out.close(); err != nil {
					return err
				}
				moreHint(e, "outbox", next)
				return nil
			}
		},
	}
}

// listOutbox lists the rows of filter after its After row, as the store's
// ListOutbox does, and goes on when that row no longer exists — pruned
// since it ended a page, which the store answers ErrNotFound — from the
// place its id names: after the row whose id sorts last before it
// (outboxBefore). Ids are made in time order, as rows are enqueued, so that
// is the row the pruned one followed, but for rows two writers enqueued in
// the same moment. A row found so and pruned in turn is looked past again,
// a few times at most.
func listOutbox(ctx context.Context, store opStore, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	for tries := 0; ; tries++ {
		rows, err := store.ListOutbox(ctx, filter)
		if filter.After.IsZero() || !errors.Is(err, turnframe.ErrNotFound) || tries == 3 {
			return rows, err
		}
		if filter.After, err = store.outboxBefore(ctx, filter.After, filter.Account); err != nil {
			return nil, err
		}
	}
}
