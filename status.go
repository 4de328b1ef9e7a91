package turnframe

import "fmt"

// TurnPhase is where a turn is in its life. Phases only move forward
// (skipping ahead is allowed); Delivered and Abandoned are terminal, and any
// non-terminal phase may move to Abandoned. The zero value, PhaseUnset, means
// "unchanged" in a Write and is never stored.
type TurnPhase uint8

const (
	// PhaseUnset is the zero value: no phase. In a Write it leaves the phase
	// as it is.
	PhaseUnset TurnPhase = iota
	// PhaseReceived: the user's message is stored. Runtime.Receive moves a
	// new turn here. A crash leaves nothing admitted: recovery restarts
	// interpretation.
	PhaseReceived
	// PhaseInterpreted: the application has understood the message but has
	// not admitted commands. Set by an application that records it.
	PhaseInterpreted
	// PhasePlanned: the turn's commands are admitted under their keys.
	// Runtime.Plan moves a turn here.
	PhasePlanned
	// PhaseExecuting: at least one command has started. Runtime.Execute moves
	// a turn here on its first attempt. A crash leaves entries Executing;
	// recovery resumes them by key.
	PhaseExecuting
	// PhaseCommitted: every admitted command is settled. Runtime.Execute
	// moves a turn here; the store refuses it while an entry is pending.
	PhaseCommitted
	// PhaseDelivered: the answer went back to the user. Terminal. Moved here
	// by Runtime.Deliver; the store refuses it while an entry is pending.
	PhaseDelivered
	// PhaseAbandoned: the turn was given up. Terminal. Moved here by
	// Runtime.Abandon from any non-terminal phase.
	PhaseAbandoned
)

var phaseNames = [...]string{"unset", "received", "interpreted", "planned", "executing", "committed", "delivered", "abandoned"}

// String returns the phase in snake case ("received", "delivered", …). The
// names are stable: stores and the CLI use them.
func (p TurnPhase) String() string { return enumName(phaseNames[:], int(p), "phase") }

// IsTerminal reports whether p is Delivered or Abandoned.
func (p TurnPhase) IsTerminal() bool { return p == PhaseDelivered || p == PhaseAbandoned }

// ParseTurnPhase returns the phase named s, or ErrInvalid.
// "unset" is not a phase a turn can be in and is refused.
func ParseTurnPhase(s string) (TurnPhase, error) {
	n, err := enumParse(phaseNames[:], s, "phase")
	return TurnPhase(n), err
}

// JournalStatus is the state of one command journal entry.
//
//	Pending → Executing(attempt) → Committed | Rejected | OutcomeUnknown
//	Pending → Committed | Rejected | OutcomeUnknown (a local attempt: WithLocalCommand)
//	Executing → Executing (a resumed attempt, under a new attempt id)
//	Executing → OutcomeUnknown (a reconciliation, once the lease ended)
//	Executing → Committed | Rejected (Recovery.Settle of an attempt stranded on an abandoned turn)
//	Executing → Pending (the attempt that took it from Pending, put back before its first call; not on an abandoned turn)
//	OutcomeUnknown → Committed | Rejected | Pending | NeedsIntervention (reconciliation only)
//	NeedsIntervention → Committed | Rejected | Pending (the app or an operator only)
//	AwaitingApproval → Pending (Approve) | Rejected (Deny, CodeDenied)
//
// Pending and Executing count as pending; AwaitingApproval does not. The
// zero value is invalid.
type JournalStatus uint8

const (
	journalUnset JournalStatus = iota
	// JournalPending: admitted under its key and not started, or put back by
	// a reconciliation that found the remote never received it. Moved here
	// by Runtime.Plan, by a resend (Recovery.Settle, or the policy), and by
	// Runtime.Execute putting back an entry it took but never called the
	// handler for (the caller left, or the renewal the call needed failed):
	// uncounted in Attempts, under the code it had before the take.
	JournalPending
	// JournalExecuting: an attempt holds it, under a lease (LeaseUntil).
	// Runtime.Execute moves an entry here, under a fresh attempt id, before
	// it calls the handler — except a local command's (WithLocalCommand),
	// which it settles straight from Pending. A crash leaves it here; once
	// the lease ended, the next Execute takes it over and runs it again
	// under the same key.
	JournalExecuting
	// JournalCommitted: the command's events, outbox rows and this status
	// were written in one transaction. Terminal. Runtime.Execute (a commit,
	// from Executing or, for a local command, from Pending) or a
	// settlement of an unknown (the remote has it) moves an entry here.
	JournalCommitted
	// JournalRejected: the command was refused with a code. Terminal. Moved
	// here by Runtime.Execute (a reject) or a settlement of an unknown.
	JournalRejected
	// JournalOutcomeUnknown: the attempt left and no answer came back (the
	// handler said so, panicked, or timed out), or its lease ended while it
	// may have been calling out. Never run again blindly (I15): only a
	// reconciliation moves it on — the policy of its command's Remote
	// (Recovery.Recover), or the app or an operator (Settle).
	JournalOutcomeUnknown
	// JournalNeedsIntervention: nothing could settle the outcome safely
	// (the remote cannot be asked or did not tell in time, and a resend is
	// not safe), so a person must. The policy moves an entry here from
	// OutcomeUnknown; only the app or an operator moves it on (Settle).
	JournalNeedsIntervention
	// JournalAwaitingApproval: admitted for a command that NeedsApproval,
	// and not yet approved or denied. Runtime.Plan (Store.Apply's Admit,
	// storekit.NewEntry) moves an entry here, and only Runtime.Approve (to Pending,
	// CodeApproved) or Runtime.Deny (to Rejected, CodeDenied) moves it out,
	// by the app or a person (an actor that MayIntervene). Execute skips
	// it; the dispatcher, recovery and the policy never touch it. It never
	// ran, so a crash leaves it as it is: it survives restarts and waits.
	// It is not pending: it holds neither Committed nor Delivered back, so
	// the answer can say "waiting for your approval" (DESIGN.md, Approval).
	JournalAwaitingApproval
)

var journalNames = [...]string{"unset", "pending", "executing", "committed", "rejected", "outcome_unknown", "needs_intervention", "awaiting_approval"}

// String returns the status in snake case ("pending", "outcome_unknown", …).
func (s JournalStatus) String() string { return enumName(journalNames[:], int(s), "journal status") }

// IsPending reports whether the entry still has to run: Pending or Executing.
func (s JournalStatus) IsPending() bool { return s == JournalPending || s == JournalExecuting }

// IsAwaitingApproval reports whether the entry waits for Approve or Deny.
func (s JournalStatus) IsAwaitingApproval() bool { return s == JournalAwaitingApproval }

// IsSettled reports whether the entry is Committed or Rejected.
func (s JournalStatus) IsSettled() bool { return s == JournalCommitted || s == JournalRejected }

// IsUncertain reports whether the entry's outcome is unknown:
// OutcomeUnknown or NeedsIntervention.
func (s JournalStatus) IsUncertain() bool {
	return s == JournalOutcomeUnknown || s == JournalNeedsIntervention
}

// ParseJournalStatus returns the status named s, or ErrInvalid.
func ParseJournalStatus(s string) (JournalStatus, error) {
	n, err := enumParse(journalNames[:], s, "journal status")
	return JournalStatus(n), err
}

// OutboxStatus is the state of one outbox row (DESIGN.md, State machines). The zero value is
// invalid.
type OutboxStatus uint8

const (
	outboxUnset OutboxStatus = iota
	// OutboxPending: waiting to be claimed once due. Store.Apply enqueues
	// rows here; a settlement to Pending (RetryClaim), ReleaseClaim (an operator), Resolve (resend) and
	// Requeue move rows back here.
	OutboxPending
	// OutboxDispatching: claimed by one worker, which is sending it, under
	// a lease (LeaseUntil) the worker extends while it runs. ClaimDue moves
	// rows here. A crash leaves the row here until its lease ends and
	// ExpireClaims moves it to OutcomeUnknown: its send may have started.
	OutboxDispatching
	// OutboxCompleted: the remote confirmed. Terminal. A settlement (CompleteClaim), or Resolve
	// with VerdictCompleted, moves a row here.
	OutboxCompleted
	// OutboxFailed: the remote refused, or the attempts ran out. Terminal
	// except for an operator's Requeue. A settlement (FailClaim), or Resolve with VerdictFailed,
	// moves a row here.
	OutboxFailed
	// OutboxOutcomeUnknown: the request left and no answer came back, or
	// the claim's lease ended while a send may have started. It is never
	// sent again blindly (I15): only Resolve moves it on — the policy of
	// its destination's Remote, or the app or an operator. MarkClaimUnknown and
	// ExpireClaims move a row here.
	OutboxOutcomeUnknown
	// OutboxNeedsIntervention: nothing could settle the outcome safely, so
	// a person must. The policy moves a row here from OutcomeUnknown (a
	// Resolve with VerdictEscalate); only the app or an operator moves it
	// on. It holds its order key, as OutcomeUnknown does.
	OutboxNeedsIntervention
)

var outboxNames = [...]string{"unset", "pending", "dispatching", "completed", "failed", "outcome_unknown", "needs_intervention"}

// String returns the status in snake case ("pending", "outcome_unknown", …).
func (s OutboxStatus) String() string { return enumName(outboxNames[:], int(s), "outbox status") }

// IsFinished reports whether the row is Completed or Failed: what Prune may
// delete.
func (s OutboxStatus) IsFinished() bool { return s == OutboxCompleted || s == OutboxFailed }

// IsUncertain reports whether the row's outcome is unknown: OutcomeUnknown
// or NeedsIntervention.
func (s OutboxStatus) IsUncertain() bool {
	return s == OutboxOutcomeUnknown || s == OutboxNeedsIntervention
}

// ParseOutboxStatus returns the status named s, or ErrInvalid.
func ParseOutboxStatus(s string) (OutboxStatus, error) {
	n, err := enumParse(outboxNames[:], s, "outbox status")
	return OutboxStatus(n), err
}

// Verdict is what a reconciliation found out about an unknown outcome.
type Verdict uint8

const (
	// VerdictUnresolved: still unknown. Nothing changes.
	VerdictUnresolved Verdict = iota
	// VerdictCompleted: the remote has it.
	VerdictCompleted
	// VerdictFailed: the remote does not have it and never will.
	VerdictFailed
	// VerdictResend: the remote is certain it never received it, or it
	// deduplicates by key and still remembers the key, so it may be sent
	// again under the same key. The one path from an unknown outcome back
	// to a send.
	VerdictResend
	// VerdictEscalate: nothing can settle it safely; a person must. The
	// entry or row becomes NeedsIntervention. Only from OutcomeUnknown.
	VerdictEscalate
)

var verdictNames = [...]string{"unresolved", "completed", "failed", "resend", "escalate"}

// String returns the verdict in snake case.
func (v Verdict) String() string { return enumName(verdictNames[:], int(v), "verdict") }

// JournalStatus returns the status a settlement with verdict v moves a
// journal entry to — Committed, Rejected, Pending (to run again under its
// key) or NeedsIntervention — and false for VerdictUnresolved, which moves
// nothing, or a value out of range.
func (v Verdict) JournalStatus() (JournalStatus, bool) {
	switch v {
	case VerdictCompleted:
		return JournalCommitted, true
	case VerdictFailed:
		return JournalRejected, true
	case VerdictResend:
		return JournalPending, true
	case VerdictEscalate:
		return JournalNeedsIntervention, true
	}
	return 0, false
}

// OutboxStatus returns the status a resolution with verdict v moves an
// outbox row to — Completed, Failed, Pending (due again) or
// NeedsIntervention — and false for VerdictUnresolved or a value out of
// range.
func (v Verdict) OutboxStatus() (OutboxStatus, bool) {
	switch v {
	case VerdictCompleted:
		return OutboxCompleted, true
	case VerdictFailed:
		return OutboxFailed, true
	case VerdictResend:
		return OutboxPending, true
	case VerdictEscalate:
		return OutboxNeedsIntervention, true
	}
	return 0, false
}

// ParseVerdict returns the verdict named s, or ErrInvalid.
func ParseVerdict(s string) (Verdict, error) {
	n, err := enumParse(verdictNames[:], s, "verdict")
	v := Verdict(n)
	if err != nil {
		return VerdictUnresolved, err
	}
	return v, nil
}

func enumName(names []string, n int, what string) string {
	if n < 0 || n >= len(names) {
		return fmt.Sprintf("%s(%d)", what, n)
	}
	return names[n]
}

func enumParse(names []string, s, what string) (int, error) {
	for i, name := range names {
		if name == s && name != "unset" {
			return i, nil
		}
	}
	return 0, invalid(what, "%q is not one", s)
}
