package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/turnframe/turnframe/sqlitestore"
)

// cutoffCommand is a command that acts on the rows older than a required
// --older-than age: release and prune. act does the work at the cut-off and
// returns what to print, as text and as JSON.
func cutoffCommand(name, summary, help, ageUsage string,
	act func(ctx context.Context, store *sqlitestore.Store, cutoff time.Time) (text string, asJSON map[string]any, err error)) *command {
	return &command{
		name:    name,
		summary: summary,
		help:    help,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			var older ageFlag
			fs.Var(&older, "older-than", ageUsage)
			jsonOut := fs.Bool("json", false, "print JSON")
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
				text, js, err := act(ctx, store, e.now().Add(-older.d))
				if err != nil {
					return describeBusy(err, db.busy)
				}
				if *jsonOut {
					return writeJSON(e.stdout, js)
				}
				fmt.Fprint(e.stdout, text)
				return nil
			}
		},
	}
}

func releaseCommand() *command {
	return cutoffCommand("release", "put claims older than --older-than back to pending",
		`Moves every outbox row still dispatching whose claim is older than
--older-than back to pending (attempts kept), so a dispatcher claims it again:
for rows a dispatcher left behind when it died. --older-than must be longer
than the longest dispatch sweep can take (claim, send timeout, settle): a
claim whose send is still running would otherwise be released and could be
sent twice. It prints the ids it released.`,
		"release claims made longer ago than this `age` (required; like 10m or 1d)",
		func(ctx context.Context, store *sqlitestore.Store, cutoff time.Time) (string, map[string]any, error) {
			ids, err := store.ReleaseExpiredClaims(ctx, cutoff)
			if err != nil {
				return "", nil, err
			}
			text := fmt.Sprintf("released %d claim(s) made before %s\n", len(ids), stamp(cutoff))
			released := make([]string, 0, len(ids))
			for _, id := range ids {
				released = append(released, id.String())
				text += id.String() + "\n"
			}
			return text, map[string]any{"claimed_before": cutoff.UTC(), "released": released}, nil
		})
}

func pruneCommand() *command {
	return cutoffCommand("prune", "delete completed and failed outbox rows finished before --older-than",
		`Deletes completed and failed outbox rows that finished longer ago than
--older-than, and prints how many. It never deletes a journal entry: every
idempotency key keeps deduplicating forever, so a late retry of an old request
never runs again.`,
		"delete rows finished longer ago than this `age` (required; like 720h or 30d)",
		func(ctx context.Context, store *sqlitestore.Store, cutoff time.Time) (string, map[string]any, error) {
			n, err := store.Prune(ctx, cutoff)
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("deleted %d finished row(s) finished before %s\n", n, stamp(cutoff)),
				map[string]any{"finished_before": cutoff.UTC(), "deleted": n}, nil
		})
}
