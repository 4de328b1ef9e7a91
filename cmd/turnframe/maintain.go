package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

func releaseCommand() *command {
	return &command{
		name:    "release",
		args:    "[--force ID...]",
		summary: "mark claims whose lease ended outcome_unknown; --force ID: back to pending, whatever its lease",
		help: `Every claim of an outbox row is a lease: the dispatcher holds the row until
the lease ends, and extends it for as long as its send runs. A lease that
ended means its dispatcher stopped (it died, or lost the database) without
settling the row — possibly after its request left. Without arguments,
release does what the application's Recover does first: it marks every
dispatching row whose lease has ended now outcome_unknown (code
turnframe.lease_ended; attempts kept), never pending, because its send may
have started, and prints their ids. The application's Recover then resolves
each by the policy of its destination's remote (looked up, resent under the
same key where the remote deduplicates, or handed to a person), or you settle
one by hand with 'turnframe settle ID completed|failed|resend'. A claim whose
lease still runs is never touched this way: its send may still be under way.
On PostgreSQL a claim another session holds locked is left as it is too:
release marks the others, names it and exits 1 (try again).

There is no age to give: the lease says how long a claim may be held, so an
age could only take a live claim too early. With --force and row ids, release
puts those rows back to pending whatever their lease, for when you know their
dispatcher is gone for good and that sending them again is safe. If it is in
fact still sending, or its request had left, the row may be sent twice (under
the same idempotency key): release says so. With --attempt N (one ID), it
releases only the claim of attempt N, the one you looked at ('turnframe
show ID'): a row claimed again since, by a dispatcher that may be alive, is
refused (exit 2), unchanged.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			force := fs.Bool("force", false, "put the rows named by id back to pending, whatever their lease (the row may be sent twice)")
			attempt := fs.String("attempt", "", "with --force and one ID: release only the claim of this `attempt` (the one you looked at); a claim taken since is refused")
			fs.Var(removedOlderThan{}, "older-than", "refused: an `age` cannot tell a live claim from a dead one; claims are leases, and release takes exactly the ended ones")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				var ids []turnframe.OutboxID
				switch {
				case !*force && len(args) > 0:
					return usagef("naming rows releases them whatever their lease, which needs --force: 'turnframe release --force %s'", args[0])
				case *force && len(args) == 0:
					return usagef("--force needs the ids of the rows to release")
				case *attempt != "" && (!*force || len(args) != 1):
					return usagef("--attempt names the claim of one row: 'turnframe release --force --attempt N ID'")
				}
				seen, err := parseRequeueFence(*attempt, "--attempt")
				if err != nil {
					return err
				}
				named := make(map[turnframe.OutboxID]bool, len(args))
				for _, a := range args {
					id, err := turnframe.ParseOutboxID(a)
					if err != nil {
						return usagef("%q is not an id (26 characters, like 01J9Z3…)", a)
					}
					if !named[id] {
						// A row named twice is released once: the second
						// release would find it pending and be refused.
						named[id] = true
						ids = append(ids, id)
					}
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				now := e.now().UTC()
				out := releaseJSON{At: at(now), Forced: *force, Released: []string{}, Expired: []string{}}
				var failed []error
				if !*force {
					expired, err := store.ExpireClaims(ctx, now)
					if err != nil {
						return describeBusy(err, db.busy)
					}
					for _, id := range expired {
						out.Expired = append(out.Expired, id.String())
					}
					// PostgreSQL's ExpireClaims skips a row another session
					// holds locked: it was not marked, and release says so.
					if left, n, err := store.endedLeases(ctx, now, 10); err == nil && n > 0 {
						failed = append(failed, fmt.Errorf("%d claim(s) whose lease had ended are held by another session and were left as they are (%v); "+
							"try again once it lets go: %w", n, left, turnframe.ErrBusy))
					}
				} else {
					fmt.Fprintf(e.stderr, "turnframe release: warning: --force releases a claim whatever its lease: "+
						"if its dispatcher is in fact still sending the row, the row may be sent twice (under the same key)\n")
					for _, id := range ids {
						if err := forceRelease(ctx, e, store, id, seen, now); err != nil {
							failed = append(failed, describeBusy(err, db.busy))
							continue
						}
						out.Released = append(out.Released, id.String())
					}
				}
				w := confirm(e, "'turnframe status' (or 'turnframe show ID')")
				switch {
				case *jsonOut:
					writeJSON(w, out) // its error is w's
				case *force:
					fmt.Fprintf(w, "released %d claim(s), forced, back to pending at %s\n", len(out.Released), stamp(now))
					for _, id := range out.Released {
						fmt.Fprintln(w, id)
					}
				default:
					fmt.Fprintf(w, "marked %d claim(s) whose lease had ended outcome_unknown, at %s: their send may have started\n",
						len(out.Expired), stamp(now))
					for _, id := range out.Expired {
						fmt.Fprintln(w, id)
					}
					if len(out.Expired) > 0 {
						fmt.Fprintf(w, "the app's Recover resolves them by the policy of their destination's remote; "+
							"or settle each by hand: 'turnframe settle ID completed|failed|resend'\n")
					}
				}
				return w.doneWith(errors.Join(failed...))
			}
		},
	}
}

// releaseJSON is what "release --json" prints: without --force, the rows
// whose lease had ended, now outcome_unknown (Expired); with it, the rows
// put back to pending (Released).
type releaseJSON struct {
	At       jsonTime `json:"at"`
	Forced   bool     `json:"forced"`
	Expired  []string `json:"expired"`
	Released []string `json:"released"`
}

// forceRelease puts one row back to pending with OutboxStore.ReleaseClaim,
// fenced on the claim it read first, and tells the operator whose claim it
// was and how its lease stood.
func forceRelease(ctx context.Context, e *env, store opStore, id turnframe.OutboxID, seen requeueFence, now time.Time) error {
	rec, err := store.GetOutbox(ctx, id)
	if err != nil {
		return noRow(id, err)
	}
	const refused = "refused, nothing changed (only a dispatching row, under the claim just read, is released)"
	if rec.Status != turnframe.OutboxDispatching {
		// Refused on the read: its fence, 0 attempts for a row never
		// claimed, would be none, and a claim taken since would be freed.
		return fmt.Errorf("%s: outbox row %s is %s: %w", refused, id, rec.Status, turnframe.ErrConflict)
	}
	if seen.set && rec.Attempts != seen.attempts {
		// The operator knows the claim they looked at is dead, not this one.
		return fmt.Errorf("%s: outbox row %s is claimed at attempt %d, not %d: claimed again since it was looked at: %w",
			refused, id, rec.Attempts, seen.attempts, turnframe.ErrConflict)
	}
	// Fenced on the claim just read (a claimed row has at least one
	// attempt), so the claim told below is the one released: one taken
	// since (the row expired, was resolved and claimed again) is refused.
	if err := store.ReleaseClaim(ctx, id, rec.Attempts, now); err != nil {
		if errors.Is(err, turnframe.ErrConflict) {
			return fmt.Errorf("%s: %w", refused, err)
		}
		return fmt.Errorf("outbox row %s: %w", id, err) // of several rows, say which one this error left
	}
	fmt.Fprintf(e.stderr, "turnframe release: %s was claimed by %s at %s; its lease %s\n",
		id, cell(rec.ClaimedBy), stamp(rec.ClaimedAt), leaseState(now, rec.LeaseUntil))
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
		"takes exactly the claims whose lease has ended (their dispatcher stopped) and marks them outcome_unknown; " +
		"an age could take a claim still being sent. To put a row back to pending whatever its lease, name it: " +
		"'turnframe release --force ID'")
}

func pruneCommand() *command {
	return &command{
		name:    "prune",
		summary: "delete completed and failed outbox rows finished before --older-than",
		help: `Deletes completed and failed outbox rows that finished longer ago than
--older-than, and prints how many. It never deletes a journal entry: every
idempotency key keeps deduplicating forever, so a late retry of an old request
never runs again. It deletes a few hundred rows at a time, oldest first, each
batch in a short transaction of its own, so the application's writes go on in
between; if it stops on an error, it says how many it deleted first (with
--json, in its output's "deleted" and "stopped"; the exit status is the
error's), and the rest are kept for another run.`,
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
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				cutoff := e.now().UTC().Add(-older.d)
				if cutoff.Before(turnframe.MinTime) {
					cutoff = turnframe.MinTime // nothing finished before 1970: the same rows, a time the store takes
				}
				n, err := store.Prune(ctx, cutoff)
				if err != nil && n == 0 {
					return describeBusy(err, db.busy)
				}
				if err != nil {
					// Prune deletes in batches, each its own transaction: the
					// ones before the error stay done.
					err = fmt.Errorf("deleted %d finished row(s) finished before %s, then stopped; the rest are kept, "+
						"run it again to delete them: %w", n, stamp(cutoff), err)
				}
				out := confirm(e, "'turnframe status'")
				if *jsonOut {
					// A script is told what was deleted even when the run
					// stopped part-way, and the exit status says it stopped.
					v := pruneJSON{FinishedBefore: at(cutoff), Deleted: n}
					if err != nil {
						v.Stopped = err.Error()
					}
					writeJSON(out, v) // its error is out's
					return out.doneWith(err)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "deleted %d finished row(s) finished before %s\n", n, stamp(cutoff))
				return out.done()
			}
		},
	}
}

// pruneJSON is what "prune --json" prints: how many finished rows it
// deleted, and, when it stopped on an error after some batches, why
// (Stopped; the exit status is the error's too).
type pruneJSON struct {
	FinishedBefore jsonTime `json:"finished_before"`
	Deleted        int      `json:"deleted"`
	Stopped        string   `json:"stopped,omitempty"`
}
