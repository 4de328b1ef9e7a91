package storekit

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
)

// checkApproval checks a move out of AwaitingApproval: it must be an
// ApprovalSettlement, and an approval needs a turn that still runs its
// commands. The actor is checked by NextEntry.
func checkApproval(e turnframe.JournalEntry, s turnframe.Settlement, phase turnframe.TurnPhase) error {
	decision := s
	decision.From = 0 // a decision may be fenced on the status it read, AwaitingApproval (checked before)
	if decision != turnframe.ApprovalSettlement(e.Key, s.To == turnframe.JournalPending) {
		return fmt.Errorf("%w: entry %q awaits approval: only an approval (to pending, code %s) or a denial (to rejected, code %s) moves it",
			turnframe.ErrConflict, e.Key, turnframe.CodeApproved, turnframe.CodeDenied)
	}
	if s.To == turnframe.JournalPending && phase == turnframe.PhaseAbandoned {
		return fmt.Errorf("%w: entry %q belongs to an abandoned turn, whose commands never run: deny it, or plan it again in a new turn, which adopts it", turnframe.ErrConflict, e.Key)
	}
	return nil
}

// isDecisionCode reports whether code is an approval's or a denial's
// (turnframe.CodeApproved, turnframe.CodeDenied): a settlement without an
// attempt that carries one is a decision, and moves only an entry awaiting
// approval.
func isDecisionCode(code string) bool {
	return code == turnframe.CodeApproved || code == turnframe.CodeDenied
}

// CheckAdmit checks that a turn in phase may admit commands: a terminal turn
// (Delivered or Abandoned) admits none, ErrConflict. Its answer is out or it
// was given up; a new command belongs to a new turn.
func CheckAdmit(phase turnframe.TurnPhase) error {
	if phase.IsTerminal() {
		return fmt.Errorf("%w: turn is %v and admits no command", turnframe.ErrConflict, phase)
	}
	return nil
}

// CheckRepeat checks the admission of key in w when w only repeats
// admissions (Write.RepeatOnly): found says whether the account admitted
// key before, adopt whether Readmit adopts that entry into w's turn. A new
// key or an adoption would admit a new command to a turn planned already:
// ErrConflict. Any other admission, and every one of a w that is not
// RepeatOnly, passes. A store calls it before it writes the admission.
func CheckRepeat(w turnframe.Write, key turnframe.IdempotencyKey, found, adopt bool) error {
	switch {
	case !w.RepeatOnly:
		return nil
	case !found:
		return fmt.Errorf("%w: key %q is new, and the write only repeats admissions: a turn is interpreted once", turnframe.ErrConflict, key)
	case adopt:
		return fmt.Errorf("%w: key %q would be adopted from an abandoned turn, and the write only repeats admissions: a turn is interpreted once", turnframe.ErrConflict, key)
	}
	return nil
}

// CheckExpectedPhase checks a Write's ExpectPhase against the turn's phase
// as stored before the Write: ErrConflict when they differ, nil when they
// agree or want is PhaseUnset. A store calls it as it loads the turn,
// before it writes anything of the Write.
func CheckExpectedPhase(stored, want turnframe.TurnPhase) error {
	if want == turnframe.PhaseUnset || want == stored {
		return nil
	}
	return fmt.Errorf("%w: turn is %v, the write expected %v: it moved since it was read", turnframe.ErrConflict, stored, want)
}

// Readmit decides what admitting cmd into turn does when its key already
// admitted existing, an entry of a turn in existingPhase:
//
//   - a different command under the key is ErrConflict;
//   - an entry that never settled (Pending, AwaitingApproval, or Executing
//     with its lease ended at now) in another turn that was abandoned is
//     adopted, in the status it has (one awaiting approval still awaits): it is
//     returned moved to turn (adopt is true), and the store gives it its
//     place at the end of turn's admission order. An abandoned turn never
//     runs its commands, so without this the command would silently never
//     run;
//   - otherwise the existing entry stands as it is and nothing runs here.
func Readmit(existing turnframe.JournalEntry, existingPhase turnframe.TurnPhase, cmd turnframe.Command, turn turnframe.TurnID, now time.Time) (entry turnframe.JournalEntry, adopt bool, err error) {
	if !turnframe.SameCommand(existing.Command, cmd) {
		return existing, false, fmt.Errorf("%w: key %q was admitted for another command (%s on %s)",
			turnframe.ErrConflict, cmd.Key, existing.Name, existing.Case)
	}
	unsettled := existing.Status == turnframe.JournalPending || existing.Status == turnframe.JournalAwaitingApproval ||
		(existing.Status == turnframe.JournalExecuting && !existing.LeaseUntil.After(now))
	if existing.Turn == turn || existingPhase != turnframe.PhaseAbandoned || !unsettled {
		return existing, false, nil
	}
	existing.Turn, existing.UpdatedAt = turn, now
	return existing, true, nil
}

// NewEntry returns the journal entry admitting cmd: Pending, or
// AwaitingApproval when cmd.NeedsApproval.
func NewEntry(account turnframe.AccountID, turn turnframe.TurnID, cmd turnframe.Command, now time.Time) turnframe.JournalEntry {
	cmd.Payload = bytes.Clone(cmd.Payload)
	status := turnframe.JournalPending
	if cmd.NeedsApproval {
		status = turnframe.JournalAwaitingApproval
	}
	return turnframe.JournalEntry{Account: account, Turn: turn, Command: cmd, Status: status, AdmittedAt: now, UpdatedAt: now}
}

// NextEntry applies a settlement to an entry of a turn in phase (as stored
// before the Write's own phase move) and returns the entry as it must be
// stored, or ErrConflict for a move the journal refuses:
//
//	Pending → Executing                 a new attempt takes it
//	Pending → Committed | Rejected | OutcomeUnknown      a local attempt settles it without a take
//	Executing → Executing               the holder renews its lease, or a new attempt takes it over once the lease ended
//	Executing → Committed | Rejected | OutcomeUnknown   by the attempt that holds it
//	Executing → Committed | Rejected                    by a reconciliation, once Stranded
//	Executing → OutcomeUnknown                          by a reconciliation, once the lease ended
//	Executing → Pending                                 by the attempt that holds it, put back before its first call, unless the turn was abandoned
//	OutcomeUnknown → Committed | Rejected | Pending | NeedsIntervention   by a reconciliation only
//	NeedsIntervention → Committed | Rejected | Pending  by a reconciliation whose actor MayIntervene
//
// A take (a new attempt moving the entry to Executing) is a compare-and-set:
// s.Prior must be the attempt the entry is under (zero if it never ran), so
// of two callers that saw the same entry only the first takes it; and an
// entry Executing under a lease that has not ended at now cannot be taken.
// The taker holds it until now + s.Lease, and the holder may renew that
// (never shortening it). So a command runs in at most one place at a time.
// A local attempt (a command declared with turnframe.WithLocalCommand,
// whose handler makes no outside call) takes no lease: it settles a
// Pending entry directly, under a new attempt id and the same
// compare-and-set on s.Prior, so of two local attempts that ran the
// handler on the same entry only the first settles it, and the second's
// Write, its events and outbox rows with it, is refused whole. Not on an
// abandoned turn, whose commands never run. A settlement from an attempt (s.Attempt not zero) needs
// the entry Executing under that attempt: a superseded attempt settles
// nothing. A reconciliation carries no attempt, and is the only move out of
// OutcomeUnknown, and out of a Stranded attempt (one left running on an
// abandoned turn whose lease ended: it may have acted, and nothing else will
// ever settle it). Nothing is taken or resent on an abandoned turn, whose
// commands never run; an attempt already running there still settles.
// An attempt that died while its turn goes on (its lease ended) may be
// declared unknown by a reconciliation, so that a Remote's policy, not a
// blind re-run, decides what becomes of it. actor is the Write's: only one
// that MayIntervene moves an entry out of NeedsIntervention, or out of
// AwaitingApproval — and that only by an approval or a denial (see
// ApprovalSettlement): to Pending with CodeApproved, never on an abandoned
// turn, or to Rejected with CodeDenied; nothing else moves it. A
// settlement without an attempt carrying either code moves nothing else: a
// second decision, late, finds the entry decided (and perhaps run, its
// outcome unknown) and is refused.
// A settlement whose From is set moves the entry only from that status (a
// compare-and-set on what its caller read). events are the events the
// Write appends for a Committed settlement; each
// must belong to the command's case (ErrInvalid otherwise).
func NextEntry(e turnframe.JournalEntry, s turnframe.Settlement, events []turnframe.StoredEvent, phase turnframe.TurnPhase, actor turnframe.Actor, now time.Time) (turnframe.JournalEntry, error) {
	if err := checkEntryMove(e, s, phase, now); err != nil {
		return turnframe.JournalEntry{}, err
	}
	if e.Status == turnframe.JournalNeedsIntervention && !orApp(actor).MayIntervene() {
		return turnframe.JournalEntry{}, fmt.Errorf("%w: entry %q needs intervention: only the app or an operator moves it, not %q", turnframe.ErrConflict, e.Key, actor)
	}
	if e.Status == turnframe.JournalAwaitingApproval && !orApp(actor).MayIntervene() {
		return turnframe.JournalEntry{}, fmt.Errorf("%w: entry %q awaits approval: only the app or a person approves or denies it, not %q", turnframe.ErrConflict, e.Key, actor)
	}
	next := e
	next.UpdatedAt = now
	next.Status = s.To
	next.Code, next.RemoteRef = "", ""
	next.LeaseUntil = time.Time{}
	if e.Status == turnframe.JournalPending && s.To != turnframe.JournalExecuting {
		// A local attempt: the one that ran, counted as a take counts it.
		next.Attempt, next.Attempts = s.Attempt, e.Attempts+1
	}
	switch s.To {
	case turnframe.JournalExecuting:
		next.LeaseUntil = leaseEnd(now, s.Lease)
		if s.Attempt != e.Attempt {
			next.Attempt = s.Attempt
			next.Attempts++
		} else if e.LeaseUntil.After(next.LeaseUntil) {
			next.LeaseUntil = e.LeaseUntil // a renewal never shortens the lease
		}
	case turnframe.JournalPending:
		next.Code = s.Code // a reconciliation's reason for the resend, if it gives one
		if e.Status == turnframe.JournalExecuting {
			// The holder put it back before it called out: the attempt
			// never started its call, and is not counted. Its id stays,
			// for the next take's compare-and-set.
			next.Attempts = max(e.Attempts-1, 0)
		}
	case turnframe.JournalCommitted:
		next.EventIDs = nil
		next.Code = s.Code // a reconciliation's reason, if it gives one
		for _, ev := range events {
			if ev.Case != e.Case {
				return turnframe.JournalEntry{}, invalid("events.case", "command %q changes %q, not %q", e.Key, e.Case, ev.Case)
			}
			next.EventIDs = append(next.EventIDs, ev.ID)
		}
		next.RemoteRef = s.RemoteRef // a reconciliation's reference, if the remote gave one…
		if next.RemoteRef == "" && e.Status.IsUncertain() {
			next.RemoteRef = e.RemoteRef // …else what the remote said when the outcome was unknown
		}
	case turnframe.JournalRejected:
		next.Code = s.Code
	case turnframe.JournalOutcomeUnknown:
		next.Code, next.RemoteRef = s.Code, s.RemoteRef
	case turnframe.JournalNeedsIntervention:
		next.Code, next.RemoteRef = s.Code, s.RemoteRef
		if next.RemoteRef == "" {
			next.RemoteRef = e.RemoteRef // escalating keeps what the remote said
		}
	}
	return next, nil
}

var entryMoves = map[turnframe.JournalStatus][]turnframe.JournalStatus{
	turnframe.JournalPending:           {turnframe.JournalExecuting, turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalOutcomeUnknown},
	turnframe.JournalExecuting:         {turnframe.JournalExecuting, turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalOutcomeUnknown, turnframe.JournalPending},
	turnframe.JournalOutcomeUnknown:    {turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending, turnframe.JournalNeedsIntervention},
	turnframe.JournalNeedsIntervention: {turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending},
	turnframe.JournalAwaitingApproval:  {turnframe.JournalPending, turnframe.JournalRejected},
}

func checkEntryMove(e turnframe.JournalEntry, s turnframe.Settlement, phase turnframe.TurnPhase, now time.Time) error {
	if s.From != 0 && s.From != e.Status {
		return fmt.Errorf("%w: entry %q is %v, not %v as the settlement read it", turnframe.ErrConflict, e.Key, e.Status, s.From)
	}
	if !slices.Contains(entryMoves[e.Status], s.To) {
		return fmt.Errorf("%w: entry %q cannot move from %v to %v", turnframe.ErrConflict, e.Key, e.Status, s.To)
	}
	if s.Attempt.IsZero() && isDecisionCode(s.Code) && e.Status != turnframe.JournalAwaitingApproval {
		// A decision read the entry awaiting approval; it has been decided
		// since, and may have run: a late second decision must not resend
		// or reject an outcome nobody looked at. A decision carries no
		// attempt; an attempt's own settlement (a handler's rejection,
		// whatever its code) always lands.
		return fmt.Errorf("%w: entry %q is %v, not awaiting approval: an approval or a denial (code %s) moves only an entry that awaits one",
			turnframe.ErrConflict, e.Key, e.Status, s.Code)
	}
	switch {
	case s.To == turnframe.JournalExecuting:
		return checkTake(e, s, phase, now)
	case e.Status == turnframe.JournalPending:
		return checkLocal(e, s, phase)
	case e.Status == turnframe.JournalExecuting && s.Attempt.IsZero():
		// A reconciliation of an attempt that died: declared unknown once
		// its lease ended, or settled once nothing will ever finish it.
		// Never put back: the attempt may have called out.
		if s.To == turnframe.JournalPending {
			return fmt.Errorf("%w: entry %q is under attempt %v: only the attempt that holds it puts it back to Pending", turnframe.ErrConflict, e.Key, e.Attempt)
		}
		if e.LeaseUntil.After(now) || (s.To != turnframe.JournalOutcomeUnknown && !turnframe.Stranded(e, phase, now)) {
			return fmt.Errorf("%w: entry %q is running attempt %v: a reconciliation declares it unknown only once its lease ended, and settles it only once its turn was abandoned too",
				turnframe.ErrConflict, e.Key, e.Attempt)
		}
		if !s.Prior.IsZero() && s.Prior != e.Attempt {
			return fmt.Errorf("%w: entry %q is under attempt %v, not %v as the reconciliation saw", turnframe.ErrConflict, e.Key, e.Attempt, s.Prior)
		}
	case e.Status == turnframe.JournalExecuting:
		if s.Attempt != e.Attempt {
			return fmt.Errorf("%w: entry %q is running attempt %v, not %v", turnframe.ErrConflict, e.Key, e.Attempt, s.Attempt)
		}
		if s.To == turnframe.JournalPending && phase == turnframe.PhaseAbandoned {
			// Pending on an abandoned turn runs only if a later plan
			// adopts it, and a plan made while the entry was held was told
			// another turn holds it and adopts nothing: put back, the
			// command would never run. Held, its lease ends and it is
			// Stranded: recovery lists and resolves it, and until then a
			// later plan adopts it.
			return fmt.Errorf("%w: entry %q belongs to an abandoned turn: a put-back would leave its command to no turn; it stays held until its lease ends", turnframe.ErrConflict, e.Key)
		}
	case e.Status == turnframe.JournalAwaitingApproval:
		return checkApproval(e, s, phase)
	case e.Status.IsUncertain():
		if !s.Attempt.IsZero() {
			return fmt.Errorf("%w: entry %q is %v: only a reconciliation moves it, not attempt %v", turnframe.ErrConflict, e.Key, e.Status, s.Attempt)
		}
		if !s.Prior.IsZero() && s.Prior != e.Attempt {
			return fmt.Errorf("%w: entry %q is %v under attempt %v, not %v as the reconciliation saw: it ran again meanwhile", turnframe.ErrConflict, e.Key, e.Status, e.Attempt, s.Prior)
		}
		if s.To == turnframe.JournalPending && phase == turnframe.PhaseAbandoned {
			return fmt.Errorf("%w: entry %q belongs to an abandoned turn, whose commands never run: a resend would never be sent", turnframe.ErrConflict, e.Key)
		}
	}
	return nil
}

// checkLocal checks a local attempt's settlement of a Pending entry: a new
// attempt id, a compare-and-set on the attempt the caller saw, and a turn
// that still runs its commands.
func checkLocal(e turnframe.JournalEntry, s turnframe.Settlement, phase turnframe.TurnPhase) error {
	if s.Attempt.IsZero() {
		return fmt.Errorf("%w: entry %q is pending: only a local attempt settles it without taking it, and a settlement without an attempt is a reconciliation", turnframe.ErrConflict, e.Key)
	}
	return checkNewAttempt(e, s, phase, "settled or put it back")
}

// checkTake checks a move to Executing: the holder renewing its lease, or a
// new attempt taking the entry.
func checkTake(e turnframe.JournalEntry, s turnframe.Settlement, phase turnframe.TurnPhase, now time.Time) error {
	if e.Status == turnframe.JournalExecuting && s.Attempt == e.Attempt {
		return nil // the holder renews its lease
	}
	if err := checkNewAttempt(e, s, phase, "took it"); err != nil {
		return err
	}
	if e.Status == turnframe.JournalExecuting && e.LeaseUntil.After(now) {
		return fmt.Errorf("%w: entry %q is held by attempt %v until %s", turnframe.ErrConflict, e.Key, e.Attempt, e.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// checkNewAttempt checks what a take and a local attempt share: a turn that
// still runs its commands, an attempt id the entry never ran under, and
// the compare-and-set on the attempt the caller saw (moved says what
// another caller did to it otherwise).
func checkNewAttempt(e turnframe.JournalEntry, s turnframe.Settlement, phase turnframe.TurnPhase, moved string) error {
	switch {
	case phase == turnframe.PhaseAbandoned:
		return fmt.Errorf("%w: entry %q belongs to an abandoned turn, whose commands never run", turnframe.ErrConflict, e.Key)
	case s.Attempt == e.Attempt:
		return fmt.Errorf("%w: entry %q: attempt %v already ran; a new attempt needs a new id", turnframe.ErrConflict, e.Key, s.Attempt)
	case s.Prior != e.Attempt:
		return fmt.Errorf("%w: entry %q is under attempt %v, not %v as the caller saw: another caller %s", turnframe.ErrConflict, e.Key, e.Attempt, s.Prior, moved)
	}
	return nil
}

// AdvancePhase returns where Write.Advance leaves a turn in phase from: to,
// when NextPhase allows the move with pending entries left; else, for a move
// past PhaseExecuting refused by pending entries, PhaseExecuting when the
// turn is before it (a settlement of one of its commands means its commands
// run: a local command's, which no take moved the turn for, must not leave
// it Planned and open to a second plan); else from.
func AdvancePhase(from, to turnframe.TurnPhase, pending int) turnframe.TurnPhase {
	switch {
	case to == turnframe.PhaseUnset:
		return from
	case turnframe.NextPhase(from, to, pending) == nil:
		return to
	case to > turnframe.PhaseExecuting && from < turnframe.PhaseExecuting &&
		turnframe.NextPhase(from, turnframe.PhaseExecuting, pending) == nil:
		return turnframe.PhaseExecuting
	}
	return from
}
