package turnframe

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
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
// that plans the same command adopts them, see Readmit).
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
// until a reconciliation settles it (NextEntry lets one).
func Stranded(e JournalEntry, phase TurnPhase, now time.Time) bool {
	return phase == PhaseAbandoned && e.Status == JournalExecuting && !e.LeaseUntil.After(now)
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

// SameCommand reports whether a and b are the same command: equal name, case,
// payload and NeedsApproval. The key is not compared.
func SameCommand(a, b Command) bool {
	return a.Name == b.Name && a.Case == b.Case && bytes.Equal(a.Payload, b.Payload) && a.NeedsApproval == b.NeedsApproval
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
func Readmit(existing JournalEntry, existingPhase TurnPhase, cmd Command, turn TurnID, now time.Time) (entry JournalEntry, adopt bool, err error) {
	if !SameCommand(existing.Command, cmd) {
		return existing, false, fmt.Errorf("%w: key %q was admitted for another command (%s on %s)",
			ErrConflict, cmd.Key, existing.Name, existing.Case)
	}
	unsettled := existing.Status == JournalPending || existing.Status == JournalAwaitingApproval ||
		(existing.Status == JournalExecuting && !existing.LeaseUntil.After(now))
	if existing.Turn == turn || existingPhase != PhaseAbandoned || !unsettled {
		return existing, false, nil
	}
	existing.Turn, existing.UpdatedAt = turn, now
	return existing, true, nil
}

// NewEntry returns the journal entry admitting cmd: Pending, or
// AwaitingApproval when cmd.NeedsApproval.
func NewEntry(account AccountID, turn TurnID, cmd Command, now time.Time) JournalEntry {
	cmd.Payload = bytes.Clone(cmd.Payload)
	status := JournalPending
	if cmd.NeedsApproval {
		status = JournalAwaitingApproval
	}
	return JournalEntry{Account: account, Turn: turn, Command: cmd, Status: status, AdmittedAt: now, UpdatedAt: now}
}

// NextEntry applies a settlement to an entry of a turn in phase (as stored
// before the Write's own phase move) and returns the entry as it must be
// stored, or ErrConflict for a move the journal refuses:
//
//	Pending → Executing                 a new attempt takes it
//	Executing → Executing               the holder renews its lease, or a new attempt takes it over once the lease ended
//	Executing → Committed | Rejected | OutcomeUnknown   by the attempt that holds it
//	Executing → Committed | Rejected                    by a reconciliation, once Stranded
//	Executing → OutcomeUnknown                          by a reconciliation, once the lease ended
//	OutcomeUnknown → Committed | Rejected | Pending | NeedsIntervention   by a reconciliation only
//	NeedsIntervention → Committed | Rejected | Pending  by a reconciliation whose actor MayIntervene
//
// A take (a new attempt moving the entry to Executing) is a compare-and-set:
// s.Prior must be the attempt the entry is under (zero if it never ran), so
// of two callers that saw the same entry only the first takes it; and an
// entry Executing under a lease that has not ended at now cannot be taken.
// The taker holds it until now + s.Lease, and the holder may renew that
// (never shortening it). So a command runs in at most one place at a time. A settlement from an attempt (s.Attempt not zero) needs
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
// turn, or to Rejected with CodeDenied; nothing else moves it.
// events are the events the Write appends for a Committed settlement; each
// must belong to the command's case (ErrInvalid otherwise).
func NextEntry(e JournalEntry, s Settlement, events []StoredEvent, phase TurnPhase, actor Actor, now time.Time) (JournalEntry, error) {
	if err := checkEntryMove(e, s, phase, now); err != nil {
		return JournalEntry{}, err
	}
	if e.Status == JournalNeedsIntervention && !actor.orApp().MayIntervene() {
		return JournalEntry{}, fmt.Errorf("%w: entry %q needs intervention: only the app or an operator moves it, not %q", ErrConflict, e.Key, actor)
	}
	if e.Status == JournalAwaitingApproval && !actor.orApp().MayIntervene() {
		return JournalEntry{}, fmt.Errorf("%w: entry %q awaits approval: only the app or a person approves or denies it, not %q", ErrConflict, e.Key, actor)
	}
	next := e
	next.UpdatedAt = now
	next.Status = s.To
	next.Code, next.RemoteRef = "", ""
	next.LeaseUntil = time.Time{}
	switch s.To {
	case JournalExecuting:
		next.LeaseUntil = leaseEnd(now, s.Lease)
		if s.Attempt != e.Attempt {
			next.Attempt = s.Attempt
			next.Attempts++
		} else if e.LeaseUntil.After(next.LeaseUntil) {
			next.LeaseUntil = e.LeaseUntil // a renewal never shortens the lease
		}
	case JournalPending:
		next.Code = s.Code // a reconciliation's reason for the resend, if it gives one
	case JournalCommitted:
		next.EventIDs = nil
		next.Code = s.Code // a reconciliation's reason, if it gives one
		for _, ev := range events {
			if ev.Case != e.Case {
				return JournalEntry{}, invalid("events.case", "command %q changes %q, not %q", e.Key, e.Case, ev.Case)
			}
			next.EventIDs = append(next.EventIDs, ev.ID)
		}
		next.RemoteRef = s.RemoteRef // a reconciliation's reference, if the remote gave one…
		if next.RemoteRef == "" && e.Status.IsUncertain() {
			next.RemoteRef = e.RemoteRef // …else what the remote said when the outcome was unknown
		}
	case JournalRejected:
		next.Code = s.Code
	case JournalOutcomeUnknown:
		next.Code, next.RemoteRef = s.Code, s.RemoteRef
	case JournalNeedsIntervention:
		next.Code, next.RemoteRef = s.Code, s.RemoteRef
		if next.RemoteRef == "" {
			next.RemoteRef = e.RemoteRef // escalating keeps what the remote said
		}
	}
	return next, nil
}

var entryMoves = map[JournalStatus][]JournalStatus{
	JournalPending:           {JournalExecuting},
	JournalExecuting:         {JournalExecuting, JournalCommitted, JournalRejected, JournalOutcomeUnknown},
	JournalOutcomeUnknown:    {JournalCommitted, JournalRejected, JournalPending, JournalNeedsIntervention},
	JournalNeedsIntervention: {JournalCommitted, JournalRejected, JournalPending},
	JournalAwaitingApproval:  {JournalPending, JournalRejected},
}

func checkEntryMove(e JournalEntry, s Settlement, phase TurnPhase, now time.Time) error {
	if !slices.Contains(entryMoves[e.Status], s.To) {
		return fmt.Errorf("%w: entry %q cannot move from %v to %v", ErrConflict, e.Key, e.Status, s.To)
	}
	switch {
	case s.To == JournalExecuting:
		return checkTake(e, s, phase, now)
	case e.Status == JournalExecuting && s.Attempt.IsZero():
		// A reconciliation of an attempt that died: declared unknown once
		// its lease ended, or settled once nothing will ever finish it.
		if e.LeaseUntil.After(now) || (s.To != JournalOutcomeUnknown && !Stranded(e, phase, now)) {
			return fmt.Errorf("%w: entry %q is running attempt %v: a reconciliation declares it unknown only once its lease ended, and settles it only once its turn was abandoned too",
				ErrConflict, e.Key, e.Attempt)
		}
		if !s.Prior.IsZero() && s.Prior != e.Attempt {
			return fmt.Errorf("%w: entry %q is under attempt %v, not %v as the reconciliation saw", ErrConflict, e.Key, e.Attempt, s.Prior)
		}
	case e.Status == JournalExecuting:
		if s.Attempt != e.Attempt {
			return fmt.Errorf("%w: entry %q is running attempt %v, not %v", ErrConflict, e.Key, e.Attempt, s.Attempt)
		}
	case e.Status == JournalAwaitingApproval:
		return checkApproval(e, s, phase)
	case e.Status.IsUncertain():
		if !s.Attempt.IsZero() {
			return fmt.Errorf("%w: entry %q is %v: only a reconciliation moves it, not attempt %v", ErrConflict, e.Key, e.Status, s.Attempt)
		}
		if !s.Prior.IsZero() && s.Prior != e.Attempt {
			return fmt.Errorf("%w: entry %q is %v under attempt %v, not %v as the reconciliation saw: it ran again meanwhile", ErrConflict, e.Key, e.Status, e.Attempt, s.Prior)
		}
		if s.To == JournalPending && phase == PhaseAbandoned {
			return fmt.Errorf("%w: entry %q belongs to an abandoned turn, whose commands never run: a resend would never be sent", ErrConflict, e.Key)
		}
	}
	return nil
}

// checkTake checks a move to Executing: the holder renewing its lease, or a
// new attempt taking the entry.
func checkTake(e JournalEntry, s Settlement, phase TurnPhase, now time.Time) error {
	if e.Status == JournalExecuting && s.Attempt == e.Attempt {
		return nil // the holder renews its lease
	}
	switch {
	case phase == PhaseAbandoned:
		return fmt.Errorf("%w: entry %q belongs to an abandoned turn, whose commands never run", ErrConflict, e.Key)
	case s.Attempt == e.Attempt:
		return fmt.Errorf("%w: entry %q: attempt %v already ran; a new attempt needs a new id", ErrConflict, e.Key, s.Attempt)
	case s.Prior != e.Attempt:
		return fmt.Errorf("%w: entry %q is under attempt %v, not %v as the caller saw: another caller took it", ErrConflict, e.Key, e.Attempt, s.Prior)
	case e.Status == JournalExecuting && e.LeaseUntil.After(now):
		return fmt.Errorf("%w: entry %q is held by attempt %v until %s", ErrConflict, e.Key, e.Attempt, e.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// AdvancePhase returns where Write.Advance leaves a turn in phase from: to,
// when NextPhase allows the move with pending entries left, else from.
func AdvancePhase(from, to TurnPhase, pending int) TurnPhase {
	if to == PhaseUnset || NextPhase(from, to, pending) != nil {
		return from
	}
	return to
}

// OutboxKey returns the key of the i-th (0-based) of n outbox rows enqueued
// by the command admitted under key: key itself when n is 1, else key, the
// OutboxKeySeparator and the row's 1-based position ("k~1", "k~2", …). A
// resumed command produces identical keys. No command key holds the
// separator, so the keys of every row of every command of an account are
// distinct: no remote that deduplicates by key drops one effect as a replay
// of another.
func OutboxKey(key IdempotencyKey, i, n int) IdempotencyKey {
	if n == 1 {
		return key
	}
	return key + IdempotencyKey(string(OutboxKeySeparator)+strconv.Itoa(i+1))
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
// of its account and order key: Pending, Dispatching, OutcomeUnknown and
// NeedsIntervention do.
func (s OutboxStatus) HoldsOrder() bool {
	return s == OutboxPending || s == OutboxDispatching || s.IsUncertain()
}

// ClaimRow claims r for worker at now, leased until now + lease. It returns
// the row as it must be stored (Dispatching, attempts + 1, claimed by
// worker at now) and the claim the worker holds. The caller has checked that
// r is due: Pending, its due time not after now, and no earlier row of its
// order key holding it back.
func ClaimRow(r OutboxRecord, worker string, now time.Time, lease time.Duration) (OutboxRecord, Claim) {
	r.Status = OutboxDispatching
	r.Attempts++
	r.ClaimedBy, r.ClaimedAt, r.UpdatedAt = worker, now, now
	r.LeaseUntil = leaseEnd(now, lease)
	return r, Claim{OutboxEntry: r.OutboxEntry, Worker: worker, ClaimedAt: now, LeaseUntil: r.LeaseUntil}
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
}

// checkHeld returns ErrClaimLost unless r is still Dispatching under the
// worker and attempt number c holds. Its lease may have ended: until another
// caller released the row, the claim still holds it.
func checkHeld(r OutboxRecord, c Claim) error {
	if r.Status != OutboxDispatching || r.ClaimedBy != c.Worker || r.Attempts != c.Attempts {
		return fmt.Errorf("%w: row %v is %v, claimed by %q at attempt %d; the claim was %q at attempt %d",
			ErrClaimLost, r.ID, r.Status, r.ClaimedBy, r.Attempts, c.Worker, c.Attempts)
	}
	return nil
}

// SettleRow applies a settlement to r as stored. It is ErrClaimLost, and r
// must not change, unless r is still Dispatching under the same worker and
// attempt number the claim holds. The settlement's code becomes the row's
// last code, whatever the status (a completed row shows how it completed,
// not an earlier failure; an unknown one shows why it is unknown).
func SettleRow(r OutboxRecord, s OutboxSettlement) (OutboxRecord, error) {
	if err := checkHeld(r, s.Claim); err != nil {
		return OutboxRecord{}, err
	}
	r.Status = s.To
	r.UpdatedAt = s.Now
	r.LastCode = s.Code
	r.LeaseUntil = time.Time{}
	switch s.To {
	case OutboxCompleted:
		r.RemoteRef, r.FinishedAt = s.RemoteRef, s.Now
	case OutboxPending:
		r.DueAt = s.RetryAt
	case OutboxFailed:
		r.FinishedAt = s.Now
	case OutboxOutcomeUnknown:
		r.RemoteRef = s.RemoteRef
	}
	return r, nil
}

// ExtendRow moves the lease of a row c holds to now + lease, or leaves it
// when it already runs later. ErrClaimLost, and r must not change, unless r
// is still Dispatching under c's worker and attempt number.
func ExtendRow(r OutboxRecord, c Claim, now time.Time, lease time.Duration) (OutboxRecord, error) {
	if err := checkHeld(r, c); err != nil {
		return OutboxRecord{}, err
	}
	if until := leaseEnd(now, lease); until.After(r.LeaseUntil) {
		r.LeaseUntil = until
	}
	return r, nil
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

// ResolveRow applies res to r as stored: an OutcomeUnknown row moves by any
// verdict but VerdictUnresolved; a NeedsIntervention row by Completed,
// Failed or Resend, and only for an actor that MayIntervene. ErrConflict
// for any other row or actor, and r must not change.
func ResolveRow(r OutboxRecord, res Resolution) (OutboxRecord, error) {
	switch {
	case r.Status == OutboxNeedsIntervention && res.Verdict == VerdictEscalate:
		return OutboxRecord{}, fmt.Errorf("%w: row %v already needs intervention", ErrConflict, r.ID)
	case r.Status == OutboxNeedsIntervention && !res.Actor.orApp().MayIntervene():
		return OutboxRecord{}, fmt.Errorf("%w: row %v needs intervention: only the app or an operator settles it, not %q", ErrConflict, r.ID, res.Actor)
	case !r.Status.IsUncertain():
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only an outcome_unknown or needs_intervention row is resolved", ErrConflict, r.ID, r.Status)
	case res.Attempts != 0 && r.Attempts != res.Attempts:
		return OutboxRecord{}, fmt.Errorf("%w: row %v is at attempt %d, not %d as the resolution saw: it was sent again meanwhile", ErrConflict, r.ID, r.Attempts, res.Attempts)
	}
	r.UpdatedAt = res.Now
	r.LastCode = res.Code
	if res.RemoteRef != "" {
		r.RemoteRef = res.RemoteRef
	}
	switch res.Verdict {
	case VerdictCompleted:
		r.Status, r.FinishedAt = OutboxCompleted, res.Now
	case VerdictFailed:
		r.Status, r.FinishedAt = OutboxFailed, res.Now
	case VerdictResend:
		r.Status, r.DueAt = OutboxPending, res.Now
	case VerdictEscalate:
		r.Status = OutboxNeedsIntervention
	default:
		return OutboxRecord{}, CheckVerdict(res.Verdict)
	}
	return r, nil
}

// CodeLeaseEnded is the code of an outbox row or a journal entry declared
// OutcomeUnknown because the lease of the claim or attempt that held it
// ended: a send or a call may have started, and nobody knows how it ended.
const CodeLeaseEnded = "turnframe.lease_ended"

// ExpireRow returns a Dispatching row whose lease ended at now as
// OutcomeUnknown, with CodeLeaseEnded: its worker died or stalled, and its
// send may have started. ErrConflict for a row that is not Dispatching or
// whose lease runs after now; r must not change then.
func ExpireRow(r OutboxRecord, now time.Time) (OutboxRecord, error) {
	if !LeaseEnded(r, now) {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v with a lease until %s; only a dispatching row whose lease ended expires",
			ErrConflict, r.ID, r.Status, r.LeaseUntil.Format(time.RFC3339Nano))
	}
	r.Status = OutboxOutcomeUnknown
	r.LastCode = CodeLeaseEnded
	r.UpdatedAt = now
	r.LeaseUntil = time.Time{}
	return r, nil
}

// RequeueRow moves a Failed row back to Pending, due at at, with a fresh
// attempt budget: AttemptBase becomes its attempts so far, so the dispatcher
// grants it MaxAttempts more, while attempt numbers keep rising (the claim's
// fence never repeats). ErrConflict for a row in another status.
func RequeueRow(r OutboxRecord, at time.Time) (OutboxRecord, error) {
	if r.Status != OutboxFailed {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only a failed row is requeued", ErrConflict, r.ID, r.Status)
	}
	r.Status, r.DueAt, r.UpdatedAt, r.FinishedAt = OutboxPending, at, at, time.Time{}
	r.AttemptBase = r.Attempts
	return r, nil
}

// LeaseEnded reports whether r is a claim to expire at now: Dispatching,
// and its lease is not running after now.
func LeaseEnded(r OutboxRecord, now time.Time) bool {
	return r.Status == OutboxDispatching && !r.LeaseUntil.After(now)
}

// ReleaseRow returns a Dispatching row to Pending at now, attempts kept and
// lease cleared. The row was due when it was claimed, so it keeps its due
// time and is due again at once, in its place. ErrConflict for a row in
// another status. A send of it may have started: released, it is sent again
// under the same key (at least once, for this case).
func ReleaseRow(r OutboxRecord, now time.Time) (OutboxRecord, error) {
	if r.Status != OutboxDispatching {
		return OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only a dispatching row is released", ErrConflict, r.ID, r.Status)
	}
	r.Status = OutboxPending
	r.UpdatedAt = now
	r.LeaseUntil = time.Time{}
	return r, nil
}

// Prunable reports whether Prune deletes r: Completed or Failed, finished
// before finishedBefore.
func Prunable(r OutboxRecord, finishedBefore time.Time) bool {
	return r.Status.IsFinished() && r.FinishedAt.Before(finishedBefore)
}
