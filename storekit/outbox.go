package storekit

import (
	"bytes"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// NewOutboxRecord returns the Pending row enqueuing m for the command
// admitted under key, as the i-th of n rows of one commit. It is due at
// m.NotBefore, or at now when that is zero or earlier.
func NewOutboxRecord(id turnframe.OutboxID, account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, i, n int, m turnframe.OutboxMessage, now time.Time) turnframe.OutboxRecord {
	due := now
	if m.NotBefore.After(now) {
		due = m.NotBefore
	}
	return turnframe.OutboxRecord{
		OutboxEntry: turnframe.OutboxEntry{
			ID: id, Account: account, Turn: turn, Key: turnframe.OutboxKey(key, i, n),
			Destination: m.Destination, Payload: bytes.Clone(m.Payload), OrderKey: m.OrderKey,
			CreatedAt: now, TraceContext: m.TraceContext,
		},
		Status: turnframe.OutboxPending, DueAt: due, UpdatedAt: now,
	}
}

// ClaimRow claims r for worker at now, leased until now + lease. It returns
// the row as it must be stored (Dispatching, attempts + 1, claimed by
// worker at now) and the claim the worker holds. The caller has checked that
// r is due: Pending, its due time not after now, and no earlier row of its
// order key holding it back.
func ClaimRow(r turnframe.OutboxRecord, worker string, now time.Time, lease time.Duration) (turnframe.OutboxRecord, turnframe.Claim) {
	r.Status = turnframe.OutboxDispatching
	r.Attempts++
	r.ClaimedBy, r.ClaimedAt, r.UpdatedAt = worker, now, now
	r.LeaseUntil = leaseEnd(now, lease)
	return r, turnframe.Claim{OutboxEntry: r.OutboxEntry, Worker: worker, ClaimedAt: now, LeaseUntil: r.LeaseUntil}
}

// checkHeld returns ErrClaimLost unless r is still Dispatching under the
// worker and attempt number c holds. Its lease may have ended: until another
// caller released the row, the claim still holds it.
func checkHeld(r turnframe.OutboxRecord, c turnframe.Claim) error {
	if r.Status != turnframe.OutboxDispatching || r.ClaimedBy != c.Worker || r.Attempts != c.Attempts {
		return fmt.Errorf("%w: row %v is %v, claimed by %q at attempt %d; the claim was %q at attempt %d",
			turnframe.ErrClaimLost, r.ID, r.Status, r.ClaimedBy, r.Attempts, c.Worker, c.Attempts)
	}
	return nil
}

// SettleRow applies a settlement to r as stored. It is ErrClaimLost, and r
// must not change, unless r is still Dispatching under the same worker and
// attempt number the claim holds. The settlement's code becomes the row's
// last code, whatever the status (a completed row shows how it completed,
// not an earlier failure; an unknown one shows why it is unknown). A
// claim put back Pending with turnframe.CodeNotSent sent nothing, so it
// spends none of the attempt budget: AttemptBase rises with the attempt it
// counted (Attempts still rises, so no claim's fence repeats).
func SettleRow(r turnframe.OutboxRecord, s turnframe.OutboxSettlement) (turnframe.OutboxRecord, error) {
	if err := checkHeld(r, s.Claim); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	r.Status = s.To
	r.UpdatedAt = s.Now
	r.LastCode = s.Code
	r.LeaseUntil = time.Time{}
	switch s.To {
	case turnframe.OutboxCompleted:
		r.RemoteRef, r.FinishedAt = s.RemoteRef, s.Now
	case turnframe.OutboxPending:
		r.DueAt = s.RetryAt
		if s.Code == turnframe.CodeNotSent {
			r.AttemptBase++
		}
	case turnframe.OutboxFailed:
		r.FinishedAt = s.Now
	case turnframe.OutboxOutcomeUnknown:
		r.RemoteRef = s.RemoteRef
	}
	return r, nil
}

// ExtendRow moves the lease of a row c holds to now + lease, or leaves it
// when it already runs later. ErrClaimLost, and r must not change, unless r
// is still Dispatching under c's worker and attempt number.
func ExtendRow(r turnframe.OutboxRecord, c turnframe.Claim, now time.Time, lease time.Duration) (turnframe.OutboxRecord, error) {
	if err := checkHeld(r, c); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	if until := leaseEnd(now, lease); until.After(r.LeaseUntil) {
		r.LeaseUntil = until
	}
	return r, nil
}

// ResolveRow applies res to r as stored: an OutcomeUnknown row moves by any
// verdict but VerdictUnresolved; a NeedsIntervention row by Completed,
// Failed or Resend, and only for an actor that MayIntervene. ErrConflict
// for any other row or actor, and r must not change.
func ResolveRow(r turnframe.OutboxRecord, res turnframe.Resolution) (turnframe.OutboxRecord, error) {
	switch {
	case r.Status == turnframe.OutboxNeedsIntervention && res.Verdict == turnframe.VerdictEscalate:
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v already needs intervention", turnframe.ErrConflict, r.ID)
	case r.Status == turnframe.OutboxNeedsIntervention && !orApp(res.Actor).MayIntervene():
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v needs intervention: only the app or an operator settles it, not %q", turnframe.ErrConflict, r.ID, res.Actor)
	case !r.Status.IsUncertain():
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only an outcome_unknown or needs_intervention row is resolved", turnframe.ErrConflict, r.ID, r.Status)
	case res.Attempts != 0 && r.Attempts != res.Attempts:
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v is at attempt %d, not %d as the resolution saw: it was sent again meanwhile", turnframe.ErrConflict, r.ID, r.Attempts, res.Attempts)
	}
	r.UpdatedAt = res.Now
	r.LastCode = res.Code
	if res.RemoteRef != "" {
		r.RemoteRef = res.RemoteRef
	}
	to, ok := res.Verdict.OutboxStatus()
	if !ok {
		return turnframe.OutboxRecord{}, turnframe.CheckVerdict(res.Verdict)
	}
	r.Status = to
	switch to {
	case turnframe.OutboxCompleted, turnframe.OutboxFailed:
		r.FinishedAt = res.Now
	case turnframe.OutboxPending:
		r.DueAt = res.Now // due again at once
	}
	return r, nil
}

// ExpireRow returns a Dispatching row whose lease ended at now as
// OutcomeUnknown, with CodeLeaseEnded: its worker died or stalled, and its
// send may have started. ErrConflict for a row that is not Dispatching or
// whose lease runs after now; r must not change then.
func ExpireRow(r turnframe.OutboxRecord, now time.Time) (turnframe.OutboxRecord, error) {
	if !turnframe.LeaseEnded(r, now) {
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v is %v with a lease until %s; only a dispatching row whose lease ended expires",
			turnframe.ErrConflict, r.ID, r.Status, r.LeaseUntil.Format(time.RFC3339Nano))
	}
	r.Status = turnframe.OutboxOutcomeUnknown
	r.LastCode = turnframe.CodeLeaseEnded
	r.UpdatedAt = now
	r.LeaseUntil = time.Time{}
	return r, nil
}

// RequeueRow moves a Failed row back to Pending, due at at, with a fresh
// attempt budget: AttemptBase becomes its attempts so far, so the dispatcher
// grants it MaxAttempts more, while attempt numbers keep rising (the claim's
// fence never repeats). attempts, when not zero, is the fence: the row's
// Attempts when the operator decided to requeue it. ErrConflict for a row
// in another status, or failed at another number of attempts (requeued,
// sent and failed again since that look). The rows of its order key after
// it went out when it failed; it goes out after them, even while one of
// them is in flight (the ordering rule looks only at earlier rows).
func RequeueRow(r turnframe.OutboxRecord, attempts int, at time.Time) (turnframe.OutboxRecord, error) {
	if r.Status != turnframe.OutboxFailed {
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only a failed row is requeued", turnframe.ErrConflict, r.ID, r.Status)
	}
	if err := fenceAttempts(r, attempts, "requeue"); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	r.Status, r.DueAt, r.UpdatedAt, r.FinishedAt = turnframe.OutboxPending, at, at, time.Time{}
	r.AttemptBase = r.Attempts
	return r, nil
}

// ReleaseRow returns a Dispatching row to Pending at now, attempts kept and
// lease cleared. The row was due when it was claimed, so it keeps its due
// time and is due again at once, in its place. attempts, when not zero, is
// the fence: the row's Attempts when the operator decided to release it,
// which names the claim (every claim adds one). ErrConflict for a row in
// another status, or under another claim (its claim ended and it was
// claimed again since that look). A send of it may have started: released,
// it is sent again under the same key (at least once, for this case).
func ReleaseRow(r turnframe.OutboxRecord, attempts int, now time.Time) (turnframe.OutboxRecord, error) {
	if r.Status != turnframe.OutboxDispatching {
		return turnframe.OutboxRecord{}, fmt.Errorf("%w: row %v is %v; only a dispatching row is released", turnframe.ErrConflict, r.ID, r.Status)
	}
	if err := fenceAttempts(r, attempts, "release"); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	r.Status = turnframe.OutboxPending
	r.UpdatedAt = now
	r.LeaseUntil = time.Time{}
	return r, nil
}

// fenceAttempts refuses, with ErrConflict, an operator's move of r decided
// when the row had another number of attempts than it has now. 0 is no
// fence: a Failed or Dispatching row has had at least one attempt.
func fenceAttempts(r turnframe.OutboxRecord, attempts int, move string) error {
	if attempts != 0 && r.Attempts != attempts {
		return fmt.Errorf("%w: row %v is %v at %d attempt(s); the %s was decided at %d", turnframe.ErrConflict, r.ID, r.Status, r.Attempts, move, attempts)
	}
	return nil
}

// Prunable reports whether Prune deletes r: Completed or Failed, finished
// before finishedBefore.
func Prunable(r turnframe.OutboxRecord, finishedBefore time.Time) bool {
	return r.Status.IsFinished() && r.FinishedAt.Before(finishedBefore)
}

// PruneBatch is how many rows a database store's Prune (sqlitestore,
// pgstore) deletes, with their history, in one transaction at most: a
// prune of a month of rows is many short transactions, each of which
// leaves the store consistent, so it never holds the store's writers (or
// its memory) for longer than one batch. Such a store reads of each row
// only what Prunable needs and what names the row and its history: never
// its payload. memstore, whose rows are in memory, prunes under one lock.
const PruneBatch = 256

// PruneInBatches is the loop of a database store's Prune: it calls batch,
// which deletes the next batch of at most PruneBatch rows in a transaction
// of its own and returns how many, until one deletes fewer or fails, and
// returns how many rows the batches deleted in all, with the error.
func PruneInBatches(batch func() (int, error)) (int, error) {
	n := 0
	for {
		k, err := batch()
		n += k
		if err != nil || k < PruneBatch {
			return n, err
		}
	}
}
