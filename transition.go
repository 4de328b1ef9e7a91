package turnframe

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the state machines (DESIGN.md, "State machines") as pure functions. Every
// store calls them inside its write transaction with the row as it is stored
// and writes back what they return, so a rule lives here once.

// NextPhase checks that a turn may move from one phase to another. Phases only
// move forward (skipping ahead is allowed), a terminal phase never moves, any
// non-terminal phase may move to Abandoned, and staying in the same
// non-terminal phase is allowed and changes nothing. Committed and Delivered
// need every journal entry of the turn settled or unknown: pending counts the
// turn's Pending and Executing entries as they will be after the Write.
// A refused move is ErrConflict.
func NextPhase(from, to TurnPhase, pending int) error {
	switch {
	case to == PhaseUnset || to > PhaseAbandoned:
		return invalid("phase", "%v is not a phase to move to", to)
	case from.IsTerminal():
		return fmt.Errorf("%w: turn is %v, a terminal phase", ErrConflict, from)
	case to == PhaseAbandoned:
		return nil
	case to < from:
		return fmt.Errorf("%w: turn phase cannot go back from %v to %v", ErrConflict, from, to)
	case (to == PhaseCommitted || to == PhaseDelivered) && pending > 0:
		return fmt.Errorf("%w: turn cannot be %v with %d command(s) pending", ErrConflict, to, pending)
	}
	return nil
}

// Unfinished reports whether recovery must look at a turn: it is
// non-terminal; or it holds an OutcomeUnknown or NeedsIntervention entry
// (holdsUnknown), whatever its phase (a delivered turn can still have a
// payment nobody settled); or it is
// Delivered and holds a Pending or Executing entry (a reconciliation found
// the remote never received a command and put it back to send again after
// the answer went out); or it is Abandoned and holds an Executing entry (an
// attempt was running when the turn was given up, and may have acted; if it
// died before it settled, nothing will ever run it again, and only a
// reconciliation can say what it did). An abandoned turn's Pending entries
// never ran and never run: they are not recovery's business (a new turn
// that plans the same command adopts them, see storekit.Readmit).
//
// A Delivered turn holding an AwaitingApproval entry (holdsAwaiting) is
// unfinished too: its answer went out saying it waits, and recovery lists
// it (RecoverReport.AwaitingApproval) without running or rejecting it. An
// abandoned turn's AwaitingApproval entries never run: a new turn that plans
// the same command adopts them, still awaiting.
func Unfinished(phase TurnPhase, holdsUnknown, holdsPending, holdsExecuting, holdsAwaiting bool) bool {
	switch phase {
	case PhaseAbandoned:
		return holdsUnknown || holdsExecuting
	case PhaseDelivered:
		return holdsUnknown || holdsPending || holdsAwaiting
	}
	return true
}

// Stranded reports whether e, an entry of a turn in phase, is an attempt
// nothing will finish: Executing on an abandoned turn, its lease ended at
// now. The attempt may have acted before it died, so its outcome is unknown
// until a reconciliation settles it (storekit.NextEntry lets one).
func Stranded(e JournalEntry, phase TurnPhase, now time.Time) bool {
	return phase == PhaseAbandoned && e.Status == JournalExecuting && !e.LeaseUntil.After(now)
}

// SameCommand reports whether a and b are the same command: equal name, case,
// payload and NeedsApproval. The key is not compared.
func SameCommand(a, b Command) bool {
	return a.Name == b.Name && a.Case == b.Case && bytes.Equal(a.Payload, b.Payload) && a.NeedsApproval == b.NeedsApproval
}

// OutboxKey returns the key of the i-th (0-based) of n outbox rows enqueued
// by the command admitted under key: key itself when n is 1, else key, the
// OutboxKeySeparator and the row's 1-based position ("k~1", "k~2", …). A
// resumed command produces identical keys. No command key admitted today
// holds the separator, so the keys of every row of every command of an
// account are distinct: no remote that deduplicates by key drops one effect
// as a replay of another. A key a schema-1 release admitted may hold it
// ("pay~1"); its rows always take the numbered form ("pay~1~1"), which
// holds the separator twice and so is no row key of a command admitted
// today, and whose last separator tells the key from the position.
func OutboxKey(key IdempotencyKey, i, n int) IdempotencyKey {
	if n == 1 && !strings.ContainsRune(string(key), OutboxKeySeparator) {
		return key
	}
	return key + IdempotencyKey(string(OutboxKeySeparator)+strconv.Itoa(i+1))
}

// HoldsOrder reports whether a row of this status holds back the later rows
// of its account and order key: Pending, Dispatching, OutcomeUnknown and
// NeedsIntervention do.
func (s OutboxStatus) HoldsOrder() bool {
	return s == OutboxPending || s == OutboxDispatching || s.IsUncertain()
}

// OutboxSettlement is one settlement of a claimed row: to Completed, Pending
// (a retry, due at RetryAt), Failed or OutcomeUnknown.
type OutboxSettlement struct {
	Claim     Claim
	To        OutboxStatus
	Code      string    // the sender's code, kept as the row's last code whatever the status
	RemoteRef string    // Completed and OutcomeUnknown: the remote's reference
	RetryAt   time.Time // Pending: when it is due again
	Now       time.Time // when the settlement happened
	// Actor is who decided the settlement, as the audit trail records it:
	// "" for the claim's worker (WorkerActor), which settles what its send
	// said; or ActorPolicy, for a row the Dispatcher did not send because
	// the policy's rule forbids it (a resend claimed after its remote
	// forgot the key). No other actor settles a claim: ErrInvalid.
	Actor Actor
	// Note says why, for the audit trail: at most MaxNoteLen bytes of
	// UTF-8 without NUL; "" for none.
	Note string
}

// SettledBy returns who made s, as the audit trail records it: its Actor,
// or else its claim's worker (WorkerActor). Stores record each settlement
// that lands as made by SettledBy, with its Note.
func (s OutboxSettlement) SettledBy() Actor {
	if s.Actor != "" {
		return s.Actor
	}
	return WorkerActor(s.Claim.Worker)
}

// leaseEnd is when a lease of length lease taken at now ends, cut to the
// microsecond the stores keep, so what a rule returns is what a read returns.
func leaseEnd(now time.Time, lease time.Duration) time.Time {
	return now.Add(lease).Truncate(time.Microsecond)
}

// Resolution settles one outbox row whose outcome is unknown, by verdict:
// Completed (with the remote's reference, if it gave one), Failed with
// Code, Pending due at Now (a resend under the same key), or, from
// OutcomeUnknown only, NeedsIntervention (VerdictEscalate). Actor is who
// decided: only one that MayIntervene settles a row that needs
// intervention. Note says why, for the audit trail.
type Resolution struct {
	ID        OutboxID
	Verdict   Verdict
	Code      string
	RemoteRef string
	Actor     Actor // "" is ActorApp
	Note      string
	Now       time.Time
	// Attempts, when not zero, fences the resolution: the row must still
	// be at this attempt number, the one whose outcome the caller looked
	// into. A row sent again meanwhile (a concurrent resolution resent it
	// and it was claimed) is ErrConflict, so a stale finding never settles
	// a later send.
	Attempts int
}

// CodeLeaseEnded is the code of an outbox row or a journal entry declared
// OutcomeUnknown because the lease of the claim or attempt that held it
// ended: a send or a call may have started, and nobody knows how it ended.
const CodeLeaseEnded = "turnframe.lease_ended"

// LeaseEnded reports whether r is a claim to expire at now: Dispatching,
// and its lease is not running after now.
func LeaseEnded(r OutboxRecord, now time.Time) bool {
	return r.Status == OutboxDispatching && !r.LeaseUntil.After(now)
}
