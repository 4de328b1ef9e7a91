package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

func releaseCommand() *command {
	return &command{
		name:    "release",
		args:    "[--force ID...]",
		summary: "put claims whose lease ended back to pending; --force ID: one row, whatever its lease",
		help: `Every claim of an outbox row is a lease: the dispatcher holds the row until
the lease ends, and extends it for as long as its send runs. A lease that
ended means its dispatcher stopped (it died, or lost the database) without
settling the row. Without arguments, release moves every dispatching row
whose lease has ended now back to pending (attempts and due time kept), so a
dispatcher claims it again, and prints their ids. A claim whose lease still
runs is never released this way: its send may still be under way.

There is no age to give: the lease says how long a claim may be held, so an
age could only release a live claim too early. With --force and row ids,
release puts those rows back to pending whatever their lease, for when you
know their dispatcher is gone for good. If it is in fact still sending, the
row may be sent twice (under the same idempotency key): release says so.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			force := fs.Bool("force", false, "release the rows named by id, whatever their lease (the row may be sent twice)")
			fs.Var(removedOlderThan{}, "older-than", "refused: an `age` cannot tell a live claim from a dead one; claims are leases, and release frees exactly the ended ones")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				var ids []turnframe.OutboxID
				switch {
				case !*force && len(args) > 0:
					return usagef("naming rows releases them whatever their lease, which needs --force: 'turnframe release --force %s'", args[0])
				case *force && len(args) == 0:
					return usagef("--force needs the ids of the rows to release")
				}
				for _, a := range args {
					id, err := turnframe.ParseOutboxID(a)
					if err != nil {
						return usagef("%q is not an id (26 characters, like 01J9Z3…)", a)
					}
					ids = append(ids, id)
				}
				store, err := db.open(ctx)
				if err != nil {
					return err
				}
				defer store.Close()
				now := e.now().UTC()
				out := releaseJSON{At: at(now), Forced: *force, Released: []string{}}
				var failed []error
				if !*force {
					released, err := store.ReleaseExpiredClaims(ctx, now)
					if err != nil {
						return describeBusy(err, db.busy)
					}
					for _, id := range released {
						out.Released = append(out.Released, id.String())
					}
				} else {
					fmt.Fprintf(e.stderr, "turnframe release: warning: --force releases a claim whatever its lease: "+
						"if its dispatcher is in fact still sending the row, the row may be sent twice (under the same key)\n")
					for _, id := range ids {
						if err := forceRelease(ctx, e, store, id, now); err != nil {
							failed = append(failed, describeBusy(err, db.busy))
							continue
						}
						out.Released = append(out.Released, id.String())
					}
				}
				if *jsonOut {
					if err := writeJSON(e.stdout, out); err != nil {
						return err
					}
				} else {
					what := "claim(s) whose lease had ended"
					if *force {
						what = "claim(s), forced"
					}
					fmt.Fprintf(e.stdout, "released %d %s, at %s\n", len(out.Released), what, stamp(now))
					for _, id := range out.Released {
						fmt.Fprintln(e.stdout, id)
					}
				}
				return errors.Join(failed...)
			}
		},
	}
}

// releaseJSON is what "release --json" prints.
type releaseJSON struct {
	At       jsonTime `json:"at"`
	Forced   bool     `json:"forced"`
	Released []string `json:"released"`
}

// forceRelease puts one row back to pending with OutboxStore.ReleaseClaim,
// first telling the operator whose claim it was and how its lease stood.
func forceRelease(ctx context.Context, e *env, store *sqlitestore.Store, id turnframe.OutboxID, now time.Time) error {
	rec, err := store.GetOutbox(ctx, id)
	if err != nil {
		return fmt.Errorf("no outbox row %s: %w", id, err)
	}
	if err := store.ReleaseClaim(ctx, id, now); err != nil {
		if errors.Is(err, turnframe.ErrConflict) {
			return fmt.Errorf("refused, nothing changed (only a dispatching row is released): %w", err)
		}
		return err
	}
	if rec.Status == turnframe.OutboxDispatching {
		fmt.Fprintf(e.stderr, "turnframe release: %s was claimed by %s at %s; its lease %s\n",
			id, cell(rec.ClaimedBy), stamp(rec.ClaimedAt), leaseState(now, rec.LeaseUntil))
	}
	return nil
}

// removedOlderThan stands for the --older-than that release took before
// claims were leases. An age cannot say whether a claim is still being
// sent: a cut-off shorter than what a live dispatcher may hold a claim for
// released rows still in flight, and they were sent twice. Releasing ended
// leases needs no age, and a cut-off on top of the lease could only be
// honoured by reading the rows and forcing each, which would release a
// claim whose lease was extended in between. So the flag is refused, with
// the reason, rather than ignored or half kept.
type removedOlderThan struct{}

func (removedOlderThan) String() string { return "" }

func (removedOlderThan) Set(string) error {
	return errors.New("release takes no age any more: every claim is a lease, and 'turnframe release' " +
		"puts back exactly the claims whose lease has ended (their dispatcher stopped); an age could release " +
		"a claim still being sent. To release a row whatever its lease, name it: 'turnframe release --force ID'")
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
				cutoff := e.now().UTC().Add(-older.d)
				if cutoff.Before(turnframe.MinTime) {
					cutoff = turnframe.MinTime // nothing finished before 1970: the same rows, a time the store takes
				}
				n, err := store.Prune(ctx, cutoff)
				if err != nil {
					return describeBusy(err, db.busy)
				}
				if *jsonOut {
					return writeJSON(e.stdout, map[string]any{"finished_before": at(cutoff), "deleted": n})
				}
				fmt.Fprintf(e.stdout, "deleted %d finished row(s) finished before %s\n", n, stamp(cutoff))
				return nil
			}
		},
	}
}
