package sqlitestore

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
// NeedsIntervention). The inner SELECT reads only the partial index
// outbox_due, which leaves out the rows the store marked held (order.go): a
// queue behind a blocked head is not read at all. The probe then applies the rule itself, so a mark missing where it
// belongs costs time, never order; a mark left where it does not belong would
// keep a due row back, which the conformance model check would catch. The
// probe reads only
// outbox_ordered, whose condition it repeats literally (the non-empty order
// key and the status list) or SQLite will not use it. The probe sees the table as it
// was before this statement, so an earlier Pending row of the same batch
// holds back a later row of its key. storetest checks this query against the
// Go rule.
//
// INDEXED BY turns a schema without those indexes into an error at once,
// instead of a claim that silently reads the whole table.
//
// The SET clause must produce what storekit.ClaimRow produces (?4 is the
// lease's end, now + lease); ClaimDue checks that it does for every row.
const claimSQL = `UPDATE outbox
	SET status = 'dispatching', attempts = attempts + 1, claimed_by = ?1, claimed_at = ?2, updated_at = ?2,
	    lease_until = ?4
	WHERE seq IN (
		SELECT o.seq FROM outbox AS o INDEXED BY outbox_due
		WHERE o.status = 'pending' AND o.held = 0 AND o.due_at <= ?2
		  AND NOT (o.order_key <> '' AND EXISTS (
			SELECT 1 FROM outbox AS p INDEXED BY outbox_ordered
			WHERE p.account = o.account AND p.order_key = o.order_key AND p.order_key <> ''
			  AND p.seq < o.seq AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention')))
		ORDER BY o.due_at, o.seq
		LIMIT ?3)
	RETURNING ` + outboxCols

// ClaimDue moves at most limit rows due at now to Dispatching under worker
// (storekit.ClaimRow: attempts + 1, claimed at now, leased until now +
// lease, to the microsecond) and returns their claims in claim order: due
// time, then enqueue order. A row is due when it is Pending, its due time
// is not after now, and no earlier row of its account and non-empty order
// key is Pending, Dispatching, OutcomeUnknown or NeedsIntervention
// (turnframe.OutboxStatus.HoldsOrder). The claim is one statement in a
// BEGIN IMMEDIATE transaction, so two callers — in this process or another
// on the same file — never claim the same row. Each claim is recorded in
// the audit trail as turnframe.WorkerActor(worker), in the same
// transaction. ErrInvalid for a now out of range (turnframe.CheckClaim), a
// limit outside 1–MaxLimit, a bad worker or a lease that is not positive. A
// crash after the commit leaves the rows Dispatching until their lease
// ends and ExpireClaims declares their outcome unknown.
func (s *Store) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	if err := turnframe.CheckClaim(now, limit, worker, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	done, err := s.enter("claim")
	if err != nil {
		return nil, err
	}
	defer done()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, "claim", err)
	}
	defer tx.Rollback()
	w := s.wrap(tx)
	until := stamp(now.Add(lease))
	rows, err := scanOutboxRows(w.QueryContext(ctx, claimSQL, worker, micros(now), limit, micros(until)))
	if err != nil {
		return nil, s.fail(ctx, "claim", err)
	}
	// RETURNING promises no order.
	slices.SortFunc(rows, func(a, b outboxRow) int {
		if c := a.rec.DueAt.Compare(b.rec.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	claims := make([]turnframe.Claim, 0, len(rows))
	actor := turnframe.WorkerActor(worker)
	for _, got := range rows {
		before, claim, err := claimOf(got.rec, worker, now, lease)
		if err != nil {
			return nil, s.fail(ctx, "claim", err)
		}
		claims = append(claims, claim)
		w.record(storekit.RowHistory(before, got.rec, actor, "", now))
	}
	if err := w.flushHistory(ctx); err != nil {
		return nil, s.fail(ctx, "claim", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.fail(ctx, "claim: commit", err)
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

// sameRecord reports whether a and b hold the same value in every field, as
// reflect.DeepEqual would, at a fraction of its cost on the claim's path:
// a nil payload differs from an empty one, and times are compared with ==,
// as the store keeps them (UTC, microseconds). TestSameRecordReadsEveryField
// fails when OutboxRecord gains a field this does not compare.
func sameRecord(a, b turnframe.OutboxRecord) bool {
	return a.ID == b.ID && a.Account == b.Account && a.Turn == b.Turn && a.Key == b.Key &&
		a.Destination == b.Destination && a.OrderKey == b.OrderKey && a.Attempts == b.Attempts &&
		bytes.Equal(a.Payload, b.Payload) && (a.Payload == nil) == (b.Payload == nil) &&
		a.CreatedAt == b.CreatedAt && a.Status == b.Status && a.DueAt == b.DueAt &&
		a.ClaimedBy == b.ClaimedBy && a.ClaimedAt == b.ClaimedAt && a.LastCode == b.LastCode &&
		a.RemoteRef == b.RemoteRef && a.UpdatedAt == b.UpdatedAt && a.FinishedAt == b.FinishedAt &&
		a.AttemptBase == b.AttemptBase && a.LeaseUntil == b.LeaseUntil && a.TraceContext == b.TraceContext
}
