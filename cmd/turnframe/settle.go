package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/turnframe/turnframe"
)

func settleCommand() *command {
	return &command{
		name:    "settle",
		args:    "ID completed|failed|resend",
		summary: "settle an outcome_unknown outbox row once you know what the remote did",
		help: `Settles an outbox row whose outcome is unknown, once you have found out from
the remote system what happened to it (I15: turnframe never sends it again on
its own):

  completed  the remote has it: the row is completed
  failed     the remote does not have it and never will: the row is failed
  resend     the remote certainly never received it: the row is pending again,
             due now, and the next dispatch sends it under the same key

The write is one immediate transaction; it waits up to --busy-timeout for the
application's writes. A row in any other status is refused (exit 2), unchanged.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			code := fs.String("code", "", "the reason `code` kept on the row (default: operator.VERDICT)")
			return func(ctx context.Context, e *env, args []string) error {
				id, err := parseOutboxID(args, "the id of an outbox row")
				if err != nil {
					return err
				}
				if len(args) < 2 {
					return usagef("missing the verdict: completed, failed or resend")
				}
				if len(args) > 2 {
					return usagef("unexpected argument %q", args[2])
				}
				v, err := turnframe.ParseVerdict(args[1])
				if err != nil || v == turnframe.VerdictUnresolved {
					return usagef("%q is not a verdict: completed, failed or resend", args[1])
				}
				c := *code
				if c == "" {
					c = "operator." + v.String()
				}
				if err := turnframe.CheckCode("code", c); err != nil {
					return usagef("--code: %v", err)
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				before, err := store.GetOutbox(ctx, id)
				if err != nil {
					return fmt.Errorf("no outbox row %s: %w", id, err)
				}
				if err := store.Resolve(ctx, id, v, c, e.now()); err != nil {
					return explainWrite(err, db)
				}
				after, err := store.GetOutbox(ctx, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "settled %s: %s → %s (code %s)\n", id, before.Status, after.Status, cell(c))
				return nil
			}
		},
	}
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
far). A row in any other status is refused (exit 2), unchanged.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			return func(ctx context.Context, e *env, args []string) error {
				id, err := parseOutboxID(args, "the id of an outbox row")
				if err != nil {
					return err
				}
				if len(args) > 1 {
					return usagef("unexpected argument %q", args[1])
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				before, err := store.GetOutbox(ctx, id)
				if err != nil {
					return fmt.Errorf("no outbox row %s: %w", id, err)
				}
				if err := store.Requeue(ctx, id, e.now()); err != nil {
					return explainWrite(err, db)
				}
				fmt.Fprintf(e.stdout, "requeued %s: failed (%s) → pending, due now, with a fresh attempt budget after %d attempt(s)\n",
					id, cell(before.LastCode), before.Attempts)
				return nil
			}
		},
	}
}

// explainWrite words a refused operator write: a row whose status the
// store's rule refuses (the error names it), or a database that stayed busy.
func explainWrite(err error, db *dbFlags) error {
	if errors.Is(err, turnframe.ErrConflict) {
		// The store's rule refused the move; its error names the row's status.
		return fmt.Errorf("refused, nothing changed (look with 'turnframe show'): %w", err)
	}
	return describeBusy(err, db.busy)
}
