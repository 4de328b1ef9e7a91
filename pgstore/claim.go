package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// claimSQL claims the due rows in one statement. It is the one place where
// the store restates a rule of package turnframe, because a claim must not
// read every row to apply it: a row is due when it is Pending, its due time
// is not after now, and no earlier row of its account and non-empty order
// key HoldsOrder (Pending, Dispatching, OutcomeUnknown or
// NeedsIntervention).
//
// The CTE reads the partial index outbox_due in claim order (due time, then
// enqueue order), which leaves out finished rows and the rows the store
// marked held (order.go): a queue behind a blocked head is not read at all.
// Its probe applies the ordering rule itself, through outbox_ordered, so a
// mark missing where it belongs costs time, never order. It locks the rows
// it picks FOR UPDATE SKIP LOCKED: a row another claimer is taking is
// passed over, never waited for and never taken twice, and a row another
// transaction changed since this statement began is read again as it now
// is, and dropped if it no longer qualifies. The probe sees the table as it
// was when the statement began, with the rows other claimers are taking
// still Pending, so a row whose earlier row of its key is being claimed
// stays back. The CTE is MATERIALIZED, so its LIMIT runs once, before the
// UPDATE (an IN (subquery) form lets the planner run the LIMIT once per
// row it joins, and claim more than limit), and the UPDATE finds its rows
// by their seq, as an array (= ANY), so the planner never joins the CTE to
// a scan of the whole table (plan_test).
//
// The SET clause must produce what storekit.ClaimRow produces ($4 is the
// lease's end, now + lease); ClaimDue checks that it does for every row.
const claimSQL = `WITH due AS MATERIALIZED (
		SELECT o.seq FROM outbox AS o
		WHERE o.status = 'pending' AND NOT o.held AND o.due_at <= $2
		  AND NOT (o.order_key <> '' AND EXISTS (
			SELECT 1 FROM outbox AS p
			WHERE p.account = o.account AND p.order_key = o.order_key AND p.order_key <> ''
			  AND p.seq < o.seq AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention')))
		ORDER BY o.due_at, o.seq
		LIMIT $3
		FOR UPDATE OF o SKIP LOCKED)
	UPDATE outbox AS u
	SET status = 'dispatching', attempts = u.attempts + 1, claimed_by = $1, claimed_at = $2, updated_at = $2,
	    lease_until = $4
	WHERE u.seq = ANY (ARRAY(SELECT seq FROM due))
	RETURNING ` + claimedCols

// claimedCols are outboxCols as RETURNING names them, on the updated row.
const claimedCols = `u.seq, u.id, u.account, u.turn, u.key, u.destination, u.payload, u.order_key, u.status,
	u.attempts, u.due_at, u.claimed_by, u.claimed_at, u.last_code, u.remote_ref, u.created_at, u.updated_at,
	u.finished_at, u.lease_until, u.attempt_base, u.trace_context`

// ClaimDue moves at most limit rows due at now to Dispatching under worker
// (storekit.ClaimRow: attempts + 1, claimed at now, leased until now +
// lease, to the microsecond) and returns their claims in claim order: due
// time, then enqueue order. A row is due when it is Pending, its due time
// is not after now, and no earlier row of its account and non-empty order
// key is Pending, Dispatching, OutcomeUnknown or NeedsIntervention
// (turnframe.OutboxStatus.HoldsOrder). The claim is one statement that
// locks what it takes (claimSQL), so two callers — in this process or
// another on the same database — never claim the same row; a caller may get
// fewer rows than are due while others claim at the same moment. Each claim
// is recorded in the audit trail as turnframe.WorkerActor(worker), in the
// same transaction. ErrInvalid for a now out of range
// (turnframe.CheckClaim), a limit outside 1–MaxLimit, a bad worker or a
// lease that is not positive. A crash after the commit leaves the rows
// Dispatching until their lease ends and ExpireClaims declares their
// outcome unknown.
func (s *Store) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	f, err := s.frameAt(ctx, s.pool, "claim", now)
	if err != nil {
		return nil, err
	}
	claims, err := s.dbClaimDue(ctx, f.in(now), limit, worker, lease)
	for i := range claims {
		claims[i] = f.claimOut(claims[i])
	}
	return claims, err
}

// dbClaimDue is ClaimDue on times in the store's frame (frame.go).
func (s *Store) dbClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	if err := turnframe.CheckClaim(now, limit, worker, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	until := stamp(now.Add(lease))
	var claims []turnframe.Claim
	err := s.inTx(ctx, "claim", func(tx *wtx) error {
		claims = nil // a try run again claims afresh
		rows, err := scanOutboxRows(tx.Query(ctx, claimSQL, worker, micros(now), limit, micros(until)))
		if err != nil {
			return err
		}
		// RETURNING promises no order.
		slices.SortFunc(rows, func(a, b outboxRow) int {
			if c := a.rec.DueAt.Compare(b.rec.DueAt); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		claims = make([]turnframe.Claim, 0, len(rows))
		actor := turnframe.WorkerActor(worker)
		for _, got := range rows {
			before, claim, err := claimOf(got.rec, worker, now, lease)
			if err != nil {
				return err
			}
			claims = append(claims, claim)
			tx.record(storekit.RowHistory(before, got.rec, actor, "", now))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// claimOf rebuilds the row as it was before the claim statement and runs
// storekit.ClaimRow on it: the claim handed out is the rule's (its lease
// kept to the microsecond, as every time), and a statement that stored
// anything else is an error (the claim rolls back). before is the row as
// it was.
func claimOf(got turnframe.OutboxRecord, worker string, now time.Time, lease time.Duration) (before turnframe.OutboxRecord, _ turnframe.Claim, _ error) {
	before = got
	before.Status = turnframe.OutboxPending
	before.Attempts--
	before.LeaseUntil = time.Time{} // a Pending row holds no lease
	want, claim := storekit.ClaimRow(before, worker, now, lease)
	want.LeaseUntil = stamp(want.LeaseUntil)
	claim.LeaseUntil = want.LeaseUntil
	if !sameRecord(want, got) {
		return before, turnframe.Claim{}, fmt.Errorf("claimed row %v stored as %+v, but storekit.ClaimRow makes %+v", got.ID, got, want)
	}
	return before, claim, nil
}

// sameRecord reports whether a and b hold the same value in every field: a
// nil payload differs from an empty one, and times are compared with ==, as
// the store keeps them (UTC, microseconds).
func sameRecord(a, b turnframe.OutboxRecord) bool {
	return a.ID == b.ID && a.Account == b.Account && a.Turn == b.Turn && a.Key == b.Key &&
		a.Destination == b.Destination && a.OrderKey == b.OrderKey && a.Attempts == b.Attempts &&
		bytes.Equal(a.Payload, b.Payload) && (a.Payload == nil) == (b.Payload == nil) &&
		a.CreatedAt == b.CreatedAt && a.Status == b.Status && a.DueAt == b.DueAt &&
		a.ClaimedBy == b.ClaimedBy && a.ClaimedAt == b.ClaimedAt && a.LastCode == b.LastCode &&
		a.RemoteRef == b.RemoteRef && a.UpdatedAt == b.UpdatedAt && a.FinishedAt == b.FinishedAt &&
		a.AttemptBase == b.AttemptBase && a.LeaseUntil == b.LeaseUntil && a.TraceContext == b.TraceContext
}
