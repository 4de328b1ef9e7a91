package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// WithLocalCommand declares the commands named names local: their handler
// makes no call outside the process, and every effect it has is in its
// Outcome — the events, the outbox messages and the application's own
// writes (Outcome.With) that Runtime.Execute writes in the commit's one
// transaction. Execute then runs such a command without first moving its
// journal entry to Executing: one write transaction per command instead of
// two (DESIGN.md, "Local commands").
//
// What changes, and why it is safe:
//
//   - A crash while the handler runs leaves the entry Pending, as if it
//     never started: nothing of it left the process, so running it again is
//     what its key promises.
//   - A handler that panics or outlives the command timeout leaves the
//     entry Pending too, not OutcomeUnknown (nothing can be unknown about
//     an effect that never left), and Execute stops there with an error: a
//     later Execute runs it again. Its late answer is discarded, recorded
//     as evidence.
//   - No lease says the command is running, so two Executes of one turn at
//     the same moment may both call the handler; the journal's
//     compare-and-set lets only the first commit land, and the second's
//     events, outbox rows and application writes roll back with it. The
//     handler must therefore tolerate a call whose answer is thrown away —
//     which a handler with no outside effect does.
//   - An entry an earlier attempt left Executing (one that ran before the
//     declaration, or from a process without it) is taken as any other.
//
// Declaring a command that does call out (a payment, an email) local
// breaks I15: a crash mid-call would run it again blindly. Later
// declarations add to earlier ones. New honours it.
func WithLocalCommand(names ...string) Option {
	return func(s *settings) {
		if s.local == nil {
			s.local = make(map[string]bool, len(names))
		}
		for _, n := range names {
			s.local[n] = true
		}
	}
}

// runLocal runs a Pending entry of a local command: the handler, then one
// Apply that settles the entry straight from Pending under a new attempt
// (storekit.NextEntry's compare-and-set on e's attempt), re-running the
// handler when the commit found its case moved. No lease is taken; see
// WithLocalCommand.
func (x *execution) runLocal(ctx context.Context, e JournalEntry) (CommandResult, error) {
	rt := x.rt
	attempt := rt.cfg.ids.AttemptID(rt.cfg.now())
	ran := false // the handler was called, on this pass or an earlier one
	for reruns := 0; ; reruns++ {
		rev, end, err := x.call(ctx, e.Command, attempt, e.Attempts+1, true)
		ran = ran || end.ran
		if err != nil {
			return ranResult(e, ran), err
		}
		if end.cause != "handler" {
			return x.localUnanswered(e, end)
		}
		w, err := x.settlement(ctx, e, Settlement{Key: e.Key, Attempt: attempt, Prior: e.Attempt}, rev, end.out)
		if err != nil {
			return ranResult(e, ran), err
		}
		applied, err := rt.store.Apply(ctx, w)
		if err == nil {
			x.phase = applied.Phase
			return x.settled(ctx, applied, end), nil
		}
		// ErrNotFound: the entry is no longer this turn's (abandoned while
		// the handler ran, and adopted by a new turn's plan).
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
			tried := e
			tried.Attempt = attempt
			x.unrecorded(ctx, tried, end, err)
			return ranResult(e, ran), fmt.Errorf("settle %v: %w", end.out.kind, err)
		}
		res, again, err := x.localRefused(ctx, e, rev, reruns, end.out.kind, err)
		if !again {
			res.Ran = true // its answer was thrown away, but it ran
			return res, err
		}
	}
}

// localUnanswered reports a local command whose handler panicked or timed
// out: nothing of it left the process, so its entry stays Pending, and
// Execute stops with an error (a timeout's wraps
// context.DeadlineExceeded).
func (x *execution) localUnanswered(e JournalEntry, end handlerEnd) (CommandResult, error) {
	r := resultOf(e)
	r.Ran = true
	r.Panic, r.Stack = end.panic, end.stack
	if end.cause == "panic" {
		return r, fmt.Errorf("local command's handler panicked: %v; its entry stays pending", end.panic)
	}
	return r, fmt.Errorf("local command's handler did not answer within %v: %w; its entry stays pending", x.rt.cfg.commandTimeout, context.DeadlineExceeded)
}

// localRefused decides, after the store refused a local settlement with
// ErrConflict or ErrNotFound, what became of the entry: adopted by another
// turn (this one was abandoned), an ErrConflict; settled or declared
// elsewhere, it is reported as it is and Execute goes on; Executing (a
// runtime without the declaration took it), ResultInFlight; Pending under
// another attempt (settled and put back meanwhile), ResultPending, and
// Execute stops; still Pending under the attempt this call saw, the
// refusal was the case moving (again reports that the handler runs once
// more, at most WithMaxConflictRetries times) or the turn being abandoned
// (an error: the command never ran, as on any abandoned turn).
func (x *execution) localRefused(ctx context.Context, e JournalEntry, rev CaseRevision, reruns int, kind OutcomeKind, refusal error) (res CommandResult, again bool, err error) {
	rt := x.rt
	seen, err := rt.store.ByKey(ctx, x.account, e.Key)
	switch {
	case err != nil && errors.Is(refusal, ErrNotFound):
		// The turn and the entry exist (Execute read them): ErrNotFound
		// would say the turn does not. What is known is the failed read.
		return resultOf(e), false, fmt.Errorf("settle %v: %w (reading the entry again, after the store found it no longer in turn %v: %v)", kind, err, x.turn, refusal)
	case err != nil:
		// A refusal is most often another attempt having settled the
		// entry first, which is no error: only the read would say, and
		// it failed (ErrBusy: try again), so ErrConflict would not.
		return resultOf(e), false, fmt.Errorf("settle %v: %w (reading the entry again, after the store refused the settlement: %v)", kind, err, refusal)
	}
	switch {
	case seen.Turn != x.turn:
		return resultOf(e), false, fmt.Errorf("settle %v: %w: the turn was abandoned while its local command ran, and turn %v adopted the command; nothing of this run was written", kind, ErrConflict, seen.Turn)
	case !seen.Status.IsPending():
		return resultOf(seen), false, nil
	case seen.Status == JournalExecuting:
		r := resultOf(seen) // a runtime that does not declare it local took it
		r.Kind = ResultInFlight
		return r, false, nil
	case seen.Attempt != e.Attempt:
		return resultOf(seen), false, nil // settled and put back to Pending meanwhile: ResultPending, and Execute stops
	}
	if m, err := rt.store.TurnPhase(ctx, x.account, x.turn); err == nil && m.Phase == PhaseAbandoned {
		return resultOf(e), false, fmt.Errorf("settle %v: %w (the turn was abandoned while its local command ran: nothing of it was written, and it never runs)", kind, refusal)
	}
	if kind != OutcomeCommit {
		return resultOf(e), false, fmt.Errorf("settle %v: %w", kind, refusal)
	}
	moved, err := rt.store.CaseRevision(ctx, x.account, e.Case)
	switch {
	case err != nil:
		// The case moving (no error: a re-run) or not: only the read
		// would tell, and it failed (ErrBusy: try again).
		return resultOf(e), false, fmt.Errorf("settle commit: %w (reading the case's revision again, after the store refused the settlement: %v)", err, refusal)
	case moved == rev:
		return resultOf(e), false, fmt.Errorf("settle commit: %w", refusal)
	case reruns >= rt.cfg.maxConflictRetries:
		return resultOf(e), false, fmt.Errorf("case %q moved from revision %d to %d under its commit, after %d re-run(s): %w",
			e.Case, rev, moved, reruns, refusal)
	}
	rt.obs.logf(ctx, slog.LevelDebug, "turnframe: case moved under a local command's commit; running it again",
		slog.String("key", string(e.Key)), slog.String("case", string(e.Case)),
		slog.Uint64("revision", uint64(rev)), slog.Uint64("now", uint64(moved)))
	return CommandResult{}, true, nil
}
