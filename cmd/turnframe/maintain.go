package main

import (
	"context"
	"flag"
	"fmt"
)

func releaseCommand() *command {
	return &command{
		name:    "release",
		summary: "put claims older than --older-than back to pending",
		help: `Moves every outbox row still dispatching whose claim is older than
--older-than back to pending (attempts kept), so a dispatcher claims it again:
for rows a dispatcher left behind when it died. --older-than must be longer
than the longest dispatch sweep can take (claim, send timeout, settle): a
claim whose send is still running would otherwise be released and could be
sent twice. It prints the ids it released.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			var older ageFlag
			fs.Var(&older, "older-than", "release claims made longer ago than this `age` (required; like 10m or 1d)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if !older.set {
					return usagef("--older-than is required")
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				cutoff := e.now().Add(-older.d)
				ids, err := store.ReleaseExpiredClaims(ctx, cutoff)
				if err != nil {
					return describeBusy(err, db.busy)
				}
				if *asJSON {
					out := make([]string, 0, len(ids))
					for _, id := range ids {
						out = append(out, id.String())
					}
					return writeJSON(e.stdout, map[string]any{"claimed_before": cutoff.UTC(), "released": out})
				}
				fmt.Fprintf(e.stdout, "released %d claim(s) made before %s\n", len(ids), stamp(cutoff))
				for _, id := range ids {
					fmt.Fprintln(e.stdout, id)
				}
				return nil
			}
		},
	}
}

func pruneCommand() *command {
	return &command{
		name:    "prune",
		summary: "delete completed and failed outbox rows finished before --older-than",
		help: `Deletes completed and failed outbox rows that finished longer ago than
--older-than, and prints how many. It never deletes a journal entry: every
idempotency key keeps deduplicating forever, so a late retry of an old request
never runs again.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			var older ageFlag
			fs.Var(&older, "older-than", "delete rows finished longer ago than this `age` (required; like 720h or 30d)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if !older.set {
					return usagef("--older-than is required")
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				cutoff := e.now().Add(-older.d)
				n, err := store.Prune(ctx, cutoff)
				if err != nil {
					return describeBusy(err, db.busy)
				}
				if *asJSON {
					return writeJSON(e.stdout, map[string]any{"finished_before": cutoff.UTC(), "deleted": n})
				}
				fmt.Fprintf(e.stdout, "deleted %d finished row(s) finished before %s\n", n, stamp(cutoff))
				return nil
			}
		},
	}
}
