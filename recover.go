package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// recoverPage is how many turns or rows Recover reads per listing.
const recoverPage = 256

// PolicyOutcome is what Recover's policy did with one uncertain outcome.
type PolicyOutcome uint8

const (
	// PolicyLeft: no Remote is declared for it; it waits for Settle.
	PolicyLeft PolicyOutcome = iota
	// PolicyWaiting: a settle delay or a backoff between lookups runs, or
	// an attempt Recover found dead still holds the entry by the store's
	// clock (NextAt: its lease's end); a later Recover looks again.
	PolicyWaiting
	// PolicyUnsure: a lookup could not tell; recorded as evidence, tried
	// again after a backoff.
	PolicyUnsure
	// PolicyCompleted: a lookup found the effect done; settled so.
	PolicyCompleted
	// PolicyResent: sent again under the same key — a lookup found it never
	// arrived, or the remote deduplicates and remembers the key.
	PolicyResent
	// PolicyRejected: a lookup found a command of an abandoned turn never
	// arrived; rejected, as the turn runs nothing.
	PolicyRejected
	// PolicyEscalated: nothing could settle it safely; NeedsIntervention.
	PolicyEscalated
)

var policyOutcomeNames = [...]string{"left", "waiting", "unsure", "completed", "resent", "rejected", "escalated"}

// String returns the outcome in snake case.
func (o PolicyOutcome) String() string {
	return enumName(policyOutcomeNames[:], int(o), "policy outcome")
}

// PolicyResult is one uncertain outcome Recover looked at.
type PolicyResult struct {
	Uncertain Uncertain  // as a report keeps it: without its Payload
	Kind      RemoteKind // what its Remote can do (RemoteUndeclared: none declared)
	Outcome   PolicyOutcome
	Code      string    // the code written, if any
	NextAt    time.Time // PolicyWaiting, PolicyUnsure: when a lookup may run again (or the attempt still holding the entry loses it)
	// Err is a write the store refused (ErrConflict: someone settled it
	// meanwhile). The outcome is then what was attempted.
	Err error
}

// RecoverReport is what one Recover did. Its Uncertain values and entries
// carry no Payload (a Verifier is given it during its call; the store's
// ByKey reads an entry's): a report of many unknown outcomes or approvals
// holds none of their payloads.
type RecoverReport struct {
	// Expired are the outbox rows whose claim's lease had ended, moved to
	// OutcomeUnknown (and then handed to the policy, as every unknown).
	Expired []OutboxID
	// Policy lists every OutcomeUnknown entry and row Recover met, with
	// what the policy did with it.
	Policy []PolicyResult
	// NeedsIntervention lists the entries and rows waiting for a person
	// after this Recover, escalated now or earlier: the rows first, in
	// enqueue order, then the entries of the unfinished turns, oldest
	// first; at most MaxLimit in all, and MoreNeedIntervention says
	// whether more wait. With a zero scope, the oldest of every account
	// come first: list an account's with RecoveryScope.Account, or with
	// ListOutbox and the CLI.
	NeedsIntervention []Uncertain
	// MoreNeedIntervention is true when more entries or rows wait for a
	// person than NeedsIntervention lists.
	MoreNeedIntervention bool
	// AwaitingApproval lists the entries awaiting approval of the turns
	// the sweep decided, in turn and admission order: a non-terminal turn,
	// or a delivered one whose answer said it waits. Recovery never runs or
	// rejects them (Runtime.Approve, Runtime.Deny); such turns are not
	// stranded. An abandoned turn's are not listed: its commands never run,
	// and a new turn that plans the same command adopts them.
	AwaitingApproval []JournalEntry
	// Turns is what the sweep of unfinished turns did.
	Turns SweepReport
}

// Count returns how many policy results had outcome o.
func (r RecoverReport) Count(o PolicyOutcome) int {
	n := 0
	for _, p := range r.Policy {
		if p.Outcome == o {
			n++
		}
	}
	return n
}

// Recover is the one recovery call: an application makes it at start-up
// and from its loop. In this order it
//
//  1. expires the outbox claims whose lease ended (ExpireClaims): their
//     sends may have started, so each becomes OutcomeUnknown;
//  2. resolves every OutcomeUnknown outbox row by the policy of its
//     destination's Remote (WithDestination; see Remote);
//  3. sweeps the unfinished turns in scope, oldest first, deciding each
//     (Decide). A turn holding unknown outcomes has them resolved by the
//     policy of each command's Remote (WithCommand) — a Stranded attempt
//     is first declared unknown, if its command has a Remote — and is then
//     decided again; every other decision goes to h (ActionNothing calls
//     nothing). A turn not yet terminal whose unknowns the policy left
//     (to a person, a later lookup or Settle) and with no pending entry is
//     answered around them, ActionRegenerateResponse, as Runtime.Deliver
//     would have answered it had the process not died; with a pending
//     entry it is left to wait, as Decide says: nothing runs while an
//     unknown outcome of its turn is held;
//  4. lists what needs intervention.
//
// Entries awaiting approval are listed (report.AwaitingApproval), never
// run, rejected or handed to a policy.
//
// Nothing is ever sent or run again blindly: a resend happens only where
// a Remote's policy allows it, or, for an outbox row whose lease ended and
// whose destination has no Remote declared, as before policies existed.
// Every move lands in the audit trail as ActorRecovery or ActorPolicy.
//
// At start-up, a zero scope recovers everything. From a running process,
// set scope.UpdatedBefore older than any turn in flight, so h is not handed
// a turn being worked on (Execute would not run a command another attempt
// holds anyway: ResultInFlight). The scope narrows the turns only; claims
// and rows are judged by their leases and statuses.
//
// One item's failure (a refused write, a handler's error or panic, its
// value and stack in the error) is recorded in the report and does not stop
// the others. The error is for a listing or an expiry the store refused, or
// ctx's once it ended (the pass stops there: the turns it has not reached
// are neither tried nor reported), with the report so far.
func (r *Recovery) Recover(ctx context.Context, scope RecoveryScope, h RecoveryHandler) (RecoverReport, error) {
	if isNil(h) {
		return RecoverReport{}, invalid("handler", "nil")
	}
	if err := scope.Validate(); err != nil {
		return RecoverReport{}, err
	}
	report := RecoverReport{Turns: SweepReport{Actions: make(map[ActionKind]int)}}
	if err := r.recoverRows(ctx, r.cfg.now(), &report); err != nil {
		return report, fmt.Errorf("recover: %w", err)
	}
	if err := r.sweep(ctx, scope, h, &report); err != nil {
		return report, fmt.Errorf("recover: %w", err)
	}
	if err := r.listIntervention(ctx, scope, &report); err != nil {
		return report, fmt.Errorf("recover: %w", err)
	}
	return report, nil
}

// recoverRows is Recover's steps 1 and 2, the outbox's part: it expires
// the claims whose lease ended and hands every OutcomeUnknown row to the
// policy. now is the instant the leases are judged at. Dispatcher.Run
// makes the same steps (Dispatcher.release), its expiry kept apart from
// its own claims.
func (r *Recovery) recoverRows(ctx context.Context, now time.Time, report *RecoverReport) error {
	expired, err := r.store.ExpireClaims(ctx, now)
	if err != nil {
		return fmt.Errorf("expire claims: %w", err)
	}
	report.Expired = expired
	countExpired(ctx, r.store, r.obs, expired)
	return r.resolveRows(ctx, report)
}

// countExpired reports the claims ExpireClaims moved to OutcomeUnknown:
// each is a send that may have left and got no answer, counted as
// SignalExternalOutcomeUnknown with its row's destination and
// CodeLeaseEnded, as a send past its deadline is — so that every
// reconciliation (SignalExternalReconciled) has its unknown counted. The
// destination costs one read per row; expiries are rare.
func countExpired(ctx context.Context, store OutboxStore, obs observer, expired []OutboxID) {
	if len(expired) == 0 {
		return
	}
	obs.logf(ctx, slog.LevelWarn, "turnframe: outbox claims whose lease ended are outcome unknown",
		slog.Int("rows", len(expired)))
	for _, id := range expired {
		var dest string
		if row, err := store.GetOutbox(ctx, id); err == nil {
			dest = row.Destination
		}
		obs.count(SignalExternalOutcomeUnknown, Labels{Destination: dest, Outcome: CodeLeaseEnded})
	}
}

// resolveRows hands every OutcomeUnknown row to the policy, a page at a
// time.
func (r *Recovery) resolveRows(ctx context.Context, report *RecoverReport) error {
	filter := OutboxFilter{Status: OutboxOutcomeUnknown, Limit: recoverPage}
	for {
		rows, err := r.store.ListOutbox(ctx, filter)
		if err != nil {
			return fmt.Errorf("list unknown outbox rows: %w", err)
		}
		for _, row := range rows {
			report.Policy = append(report.Policy, r.applyPolicy(ctx, UncertainRow(row), PhaseUnset).reported())
		}
		if len(rows) < filter.Limit {
			return nil
		}
		filter.After = rows[len(rows)-1].ID
	}
}

// sweep decides every unfinished turn in scope, a page at a time, and acts
// on each decision.
func (r *Recovery) sweep(ctx context.Context, scope RecoveryScope, h RecoveryHandler, report *RecoverReport) error {
	for {
		markers, err := r.Unfinished(ctx, scope, recoverPage)
		if err != nil {
			return err
		}
		for _, m := range markers {
			if err := ctx.Err(); err != nil {
				return err // cut short: the turns left are not tried, nor warned about
			}
			r.recoverTurn(ctx, h, m, report)
		}
		if len(markers) < recoverPage {
			return nil
		}
		scope.After = markers[len(markers)-1].Turn
	}
}

// recoverTurn decides one turn; unknown outcomes go to the policy, after
// which the turn is decided again; the decision goes to h.
func (r *Recovery) recoverTurn(ctx context.Context, h RecoveryHandler, m TurnPhaseMarker, report *RecoverReport) {
	report.Turns.Turns++
	action, err := r.Decide(ctx, m.Account, m.Turn)
	if err == nil && action.Kind == ActionReconcileExternal {
		for _, e := range action.Entries {
			if e.Status != JournalNeedsIntervention { // a person's: listed below
				report.Policy = append(report.Policy, r.resolveEntry(ctx, e, action.Phase).reported())
			}
		}
		action, err = r.decided(ctx, m.Account, m.Turn, true)
	}
	if err == nil {
		report.Turns.Actions[action.Kind]++
		if action.Phase != PhaseAbandoned { // its commands never run: a new turn's plan adopts them
			for _, e := range action.Awaiting {
				e.Payload = nil // as the report keeps it: the entry's own read has it
				report.AwaitingApproval = append(report.AwaitingApproval, e)
			}
		}
		err = dispatchAction(ctx, h, m, action)
	}
	if err != nil {
		report.Turns.Failures = append(report.Turns.Failures, SweepFailure{Account: m.Account, Turn: m.Turn, Action: action.Kind, Err: err})
		r.obs.logf(ctx, slog.LevelWarn, "turnframe: recovery: turn not recovered",
			slog.String("turn", m.Turn.String()), slog.String("action", action.Kind.String()), slog.Any("error", err))
	}
}

// resolveEntry hands one unknown entry to the policy. An attempt that died
// (stranded on an abandoned turn, or of a command whose Remote forbids a
// re-run) is declared unknown first, if its command has a Remote.
func (r *Recovery) resolveEntry(ctx context.Context, e JournalEntry, phase TurnPhase) PolicyResult {
	u := UncertainEntry(e)
	remote, declared := r.cfg.remoteFor(SubjectJournal, e.Name)
	if e.Status != JournalExecuting {
		return r.applyPolicy(ctx, u, phase)
	}
	if !declared {
		return PolicyResult{Uncertain: u, Kind: RemoteUndeclared, Outcome: PolicyLeft}
	}
	applied, err := r.store.Apply(ctx, Write{
		Account: e.Account, Turn: e.Turn, Actor: ActorRecovery, Now: r.cfg.now(),
		Note:   "attempt " + e.Attempt.String() + " died (its lease ended) and may have acted; nothing may run it again blindly",
		Settle: []Settlement{{Key: e.Key, To: JournalOutcomeUnknown, Code: CodeLeaseEnded, Prior: e.Attempt}},
	})
	if err != nil {
		if by, ok, rerr := adoptedBy(ctx, r.store, e.Account, e.Key, e.Turn, err); rerr != nil {
			err = rerr
		} else if ok {
			// That turn decides it now.
			err = fmt.Errorf("%w: turn %v adopted the entry while its dead attempt was being declared unknown", ErrConflict, by)
		} else if seen, live := r.stillHeld(ctx, e, err); live {
			return PolicyResult{Uncertain: u, Kind: remote.Kind(), Outcome: PolicyWaiting, NextAt: seen.LeaseUntil}
		}
		return PolicyResult{Uncertain: u, Kind: remote.Kind(), Outcome: PolicyLeft, Err: err}
	}
	r.obs.count(SignalExternalOutcomeUnknown, deadAttemptLabels(e.Name)) // as Execute counts its own declaration
	return r.applyPolicy(ctx, UncertainEntry(applied.Settled[0]), phase)
}

// stillHeld tells whether refusal, the store's answer to declaring e's
// attempt dead, is the entry still held: Executing in e's turn, under
// that attempt (the store, on its own clock, judged the lease running
// where Recovery's clock said it ended: pgstore measures leases on the
// database's) or under one that took it over since. That is an attempt
// in flight, as Execute reports it, not a failure; seen is the entry read
// again.
func (r *Recovery) stillHeld(ctx context.Context, e JournalEntry, refusal error) (seen JournalEntry, held bool) {
	if !errors.Is(refusal, ErrConflict) {
		return e, false
	}
	seen, err := r.store.ByKey(ctx, e.Account, e.Key)
	if err != nil {
		return e, false
	}
	return seen, seen.Turn == e.Turn && seen.Status == JournalExecuting
}

// reported returns p as a report keeps it: without its payload.
func (p PolicyResult) reported() PolicyResult {
	p.Uncertain = p.Uncertain.reported()
	return p
}

// reported returns u as a report keeps it: without its payload.
func (u Uncertain) reported() Uncertain {
	u.Payload = nil
	return u
}

// listIntervention lists the entries and rows that need a person: rows by
// status, entries through the unfinished turns in scope that hold them.
func (r *Recovery) listIntervention(ctx context.Context, scope RecoveryScope, report *RecoverReport) error {
	rows, err := r.store.ListOutbox(ctx, OutboxFilter{Status: OutboxNeedsIntervention, Account: scope.Account, Limit: MaxLimit})
	if err != nil {
		return fmt.Errorf("list outbox rows needing intervention: %w", err)
	}
	for _, row := range rows {
		report.NeedsIntervention = append(report.NeedsIntervention, UncertainRow(row).reported())
	}
	if len(rows) == MaxLimit {
		more, err := r.store.ListOutbox(ctx, OutboxFilter{Status: OutboxNeedsIntervention, Account: scope.Account, After: rows[len(rows)-1].ID, Limit: 1})
		if err != nil {
			return fmt.Errorf("list outbox rows needing intervention: %w", err)
		}
		report.MoreNeedIntervention = len(more) > 0
	}
	scope = RecoveryScope{Account: scope.Account} // escalating touched the turn: a stale-only scope would miss it
	for {
		markers, err := r.Unfinished(ctx, scope, recoverPage)
		if err != nil {
			return err
		}
		for _, m := range markers {
			entries, err := r.store.ForTurn(ctx, m.Account, m.Turn)
			if err != nil {
				return fmt.Errorf("entries of turn %v: %w", m.Turn, err)
			}
			for _, e := range entries {
				switch {
				case e.Status != JournalNeedsIntervention:
				case len(report.NeedsIntervention) < MaxLimit:
					report.NeedsIntervention = append(report.NeedsIntervention, UncertainEntry(e).reported())
				default:
					report.MoreNeedIntervention = true
					return nil
				}
			}
		}
		if len(markers) < recoverPage {
			return nil
		}
		scope.After = markers[len(markers)-1].Turn
	}
}
