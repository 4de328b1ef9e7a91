package turnframe

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// This file holds the state machines of DESIGN §5 as pure functions. Every
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
// non-terminal; or it holds an OutcomeUnknown entry, whatever its phase (a
// delivered turn can still have a payment nobody settled); or it is
// Delivered and holds a Pending or Executing entry (a reconciliation found
// the remote never received a command and put it back to send again after
// the answer went out). An Abandoned turn's pending entries never run.
func Unfinished(phase TurnPhase, holdsUnknown, holdsPending bool) bool {
	switch phase {
	case PhaseAbandoned:
		return holdsUnknown
	case PhaseDelivered:
		return holdsUnknown || holdsPending
	}
	return true
}

// CheckAdmit checks that a turn in phase may admit commands: a terminal turn
// (Delivered or Abandoned) admits none, ErrConflict. Its answer is out or it
// was given up; a new command belongs to a new turn.
func CheckAdmit(phase TurnPhase) error {
	if phase.IsTerminal() {
		return fmt.Errorf("%w: turn is %v and admits no command", ErrConflict, phase)
	}
	return nil
}

// SameCommand reports whether a and b are the same command: equal name, case
// and payload. The key is not compared.
func SameCommand(a, b Command) bool {
	return a.Name == b.Name && a.Case == b.Case && bytes.Equal(a.Payload, b.Payload)
}

// Readmit checks a command against the entry its key already admitted:
// nil when it is the same command (the existing entry stands and nothing
// runs), ErrConflict when the key was used for a different one.
func Readmit(existing JournalEntry, cmd Command) error {
	if !SameCommand(existing.Command, cmd) {
		return fmt.Errorf("%w: key %q was admitted for another command (%s on %s)",
			ErrConflict, cmd.Key, existing.Name, existing.Case)
	}
	return nil
}

// NewEntry returns the Pending journal entry admitting cmd.
func NewEntry(account AccountID, turn TurnID, cmd Command, now time.Time) JournalEntry {
	cmd.Payload = bytes.Clone(cmd.Payload)
	return JournalEntry{Account: account, Turn: turn, Command: cmd, Status: JournalPending, AdmittedAt: now, UpdatedAt: now}
}

// NextEntry applies a settlement to an entry and returns the entry as it must
// be stored, or ErrConflict for a move the journal refuses:
//
//	Pending → Executing
//	Executing → Executing (new attempt) | Committed | Rejected | OutcomeUnknown
//	OutcomeUnknown → Committed | Rejected | Pending (reconciliation)
//
// Leaving Executing for a settled or unknown status needs s.Attempt to be the
// attempt that is running, so a superseded attempt cannot settle. events are
// the events the Write appends for a Committed settlement; each must belong to
// the command's case (ErrInvalid otherwise).
func NextEntry(e JournalEntry, s Settlement, events []StoredEvent, now time.Time) (JournalEntry, error) {
	if err := checkEntryMove(e, s); err != nil {
		return JournalEntry{}, err
	}
	next := e
	next.UpdatedAt = now
	next.Status = s.To
	next.Code, next.RemoteRef = "", ""
	switch s.To {
	case JournalExecuting:
		next.Attempt = s.Attempt
		next.Attempts++
	case JournalCommitted:
		next.EventIDs = nil
		for _, ev := range events {
			if ev.Case != e.Case {
				return JournalEntry{}, invalid("events.case", "command %q changes %q, not %q", e.Key, e.Case, ev.Case)
			}
			next.EventIDs = append(next.EventIDs, ev.ID)
		}
	case JournalRejected:
		next.Code = s.Code
	case JournalOutcomeUnknown:
		next.RemoteRef = s.RemoteRef
	}
	return next, nil
}

var entryMoves = map[JournalStatus][]JournalStatus{
	JournalPending:        {JournalExecuting},
	JournalExecuting:      {JournalExecuting, JournalCommitted, JournalRejected, JournalOutcomeUnknown},
	JournalOutcomeUnknown: {JournalCommitted, JournalRejected, JournalPending},
}

func checkEntryMove(e JournalEntry, s Settlement) error {
	if !slices.Contains(entryMoves[e.Status], s.To) {
		return fmt.Errorf("%w: entry %q cannot move from %v to %v", ErrConflict, e.Key, e.Status, s.To)
	}
	if e.Status == JournalExecuting && s.To != JournalExecuting && s.Attempt != e.Attempt {
		return fmt.Errorf("%w: entry %q is running attempt %v, not %v", ErrConflict, e.Key, e.Attempt, s.Attempt)
	}
	return nil
}

// OutboxKey returns the idempotency key of the i-th (0-based) of n outbox rows
// enqueued by the command admitted under key: key itself when n is 1, else
// "key/1", "key/2", …, so a resumed command produces identical keys.
func OutboxKey(key IdempotencyKey, i, n int) IdempotencyKey {
	if n == 1 {
		return key
	}
	return key + "/" + IdempotencyKey(strconv.Itoa(i+1))
}

// NewOutboxRecord returns the Pending row enqueuing m for the command
// admitted under key, as the i-th of n rows of one commit. It is due at
// m.NotBefore, or at now when that is zero or earlier.
func NewOutboxRecord(id OutboxID, account AccountID, turn TurnID, key IdempotencyKey, i, n int, m OutboxMessage, now time.Time) OutboxRecord {
	due := now
	if m.NotBefore.After(now) {
		due = m.NotBefore
	}
	return OutboxRecord{
		OutboxEntry: OutboxEntry{
			ID: id, Account: account, Turn: turn, Key: OutboxKey(key, i, n),
			Destination: m.Destination, Payload: bytes.Clone(m.Payload), OrderKey: m.OrderKey,
			CreatedAt: now,
		},
		Status: OutboxPending, DueAt: due, UpdatedAt: now,
	}
}

// HoldsOrder reports whether a row of this status holds back the later rows
// of its account and order key: Pending, Dispatching and OutcomeUnknown do.
func (s OutboxStatus) HoldsOrder() bool {
	return s == OutboxPending || s == OutboxDispatching || s == OutboxOutcomeUnknown
}

// ClaimRow claims r for worker at now. It returns the row as it must be
// stored (Dispatching, attempts + 1, claimed by worker at now) and the claim
// the worker holds. The caller has checked that r is due: Pending, its due
// time not after now, and no earlier row of its order key holding it back.
func ClaimRow(r OutboxRecord, worker string, now time.Time) (OutboxRecord, Claim) {
	r.Status = OutboxDispatching
	r.Attempts++
	r.ClaimedBy, r.ClaimedAt, r.UpdatedAt = worker, now, now
	return r, Claim{OutboxEntry: r.OutboxEntry, Worker: worker, ClaimedAt: now}
}

// OutboxSettlement is one settlement of a claimed row: to Completed, Pending
// (a retry, due at RetryAt), Failed or OutcomeUnknown.
type OutboxSettlement struct {
	Claim     Claim
	To        OutboxStatus
	Code      string    // Pending (retry) and Failed: the reason code
	RemoteRef string    // Completed and OutcomeUnknown: the remote's reference
	RetryAt   time.Time // Pending: when it is due again
	Now       time.Time // when the settlement happened
}

// SettleRow applies a settlement to r as stored. It is ErrClaimLost, and r
// must not change, unless r is still Dispatching under the same worker and
// attempt number the claim holds.
func SettleRow(r OutboxRecord, s OutboxSettlement) (OutboxRecord, error) {
	c := s.Claim
	if r.Status != OutboxDispatching || r.ClaimedBy != c.Worker || r.Attempts != c.Attempts {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v, claimed by %q at attempt %d; the claim was %q at attempt %d",
			ErrClaimLost, r.ID, r.Status, r.ClaimedBy, r.Attempts, c.Worker, c.Attempts)
	}
	r.Status = s.To
	r.UpdatedAt = s.Now
	switch s.To {
	case OutboxCompleted:
		r.RemoteRef, r.FinishedAt = s.RemoteRef, s.Now
	case OutboxPending:
		r.LastCode, r.DueAt = s.Code, s.RetryAt
	case OutboxFailed:
		r.LastCode, r.FinishedAt = s.Code, s.Now
	case OutboxOutcomeUnknown:
		r.RemoteRef = s.RemoteRef
	}
	return r, nil
}

// ResolveRow settles an OutcomeUnknown row by verdict: Completed, Failed with
// code, or Pending due at now (resend, attempts kept). ErrConflict for a row
// in another status, which must not change.
func ResolveRow(r OutboxRecord, v Verdict, code string, now time.Time) (OutboxRecord, error) {
	if r.Status != OutboxOutcomeUnknown {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only an outcome_unknown row is resolved", ErrConflict, r.ID, r.Status)
	}
	r.UpdatedAt = now
	r.LastCode = code
	switch v {
	case VerdictCompleted:
		r.Status, r.FinishedAt = OutboxCompleted, now
	case VerdictFailed:
		r.Status, r.FinishedAt = OutboxFailed, now
	case VerdictResend:
		r.Status, r.DueAt = OutboxPending, now
	default:
		return OutboxRecord{}, CheckVerdict(v)
	}
	return r, nil
}

// RequeueRow moves a Failed row back to Pending, due at at. ErrConflict for a
// row in another status.
func RequeueRow(r OutboxRecord, at time.Time) (OutboxRecord, error) {
	if r.Status != OutboxFailed {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only a failed row is requeued", ErrConflict, r.ID, r.Status)
	}
	r.Status, r.DueAt, r.UpdatedAt, r.FinishedAt = OutboxPending, at, at, time.Time{}
	return r, nil
}

// ClaimExpired reports whether r is a claim to release: Dispatching and
// claimed before claimedBefore.
func ClaimExpired(r OutboxRecord, claimedBefore time.Time) bool {
	return r.Status == OutboxDispatching && r.ClaimedAt.Before(claimedBefore)
}

// ReleaseRow returns an expired claim to Pending, attempts kept. The row was
// due when it was claimed, so it is due again at once. Its update time is
// claimedBefore: a release takes no clock of its own.
func ReleaseRow(r OutboxRecord, claimedBefore time.Time) OutboxRecord {
	r.Status = OutboxPending
	r.UpdatedAt = claimedBefore
	return r
}

// Prunable reports whether Prune deletes r: Completed or Failed, finished
// before finishedBefore.
func Prunable(r OutboxRecord, finishedBefore time.Time) bool {
	return r.Status.IsFinished() && r.FinishedAt.Before(finishedBefore)
}
