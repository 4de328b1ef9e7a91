package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// lockOutboxRowsSQL reads the rows of a list of ids and locks them, in
// enqueue order (two settlements of overlapping rows lock them in the same
// order).
const lockOutboxRowsSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE id = ANY($1) ORDER BY seq FOR UPDATE`

// lockOutboxRows reads and locks the rows of ids. A missing id is absent
// from the map.
func lockOutboxRows(ctx context.Context, tx *wtx, ids []turnframe.OutboxID) (map[turnframe.OutboxID]outboxRow, error) {
	texts := make([]string, len(ids))
	for i, id := range ids {
		texts[i] = id.String()
	}
	rows, err := scanOutboxRows(tx.Query(ctx, lockOutboxRowsSQL, texts))
	if err != nil {
		return nil, err
	}
	out := make(map[turnframe.OutboxID]outboxRow, len(rows))
	for _, r := range rows {
		out[r.rec.ID] = r
	}
	return out, nil
}

// Settle applies several settlements in one transaction (group commit: one
// commit for all), each by storekit.SettleRow: the sender's code becomes
// the row's last code, whatever the status, and the lease is cleared.
// results[i] is the outcome of settlements[i] alone: nil; ErrInvalid for a
// bad settlement (checked before the transaction); ErrClaimLost, changing
// nothing of that row, unless it is still Dispatching under the claim's
// worker and attempt number (a row settled twice in one batch loses the
// second time, and a row that no longer exists holds no claim). One refused
// settlement does not refuse the others. The rows are locked before the
// rule reads them, and written in one statement. Each settlement that lands
// is recorded in the audit trail as OutboxSettlement.SettledBy names it (its
// claim's worker, unless it names ActorPolicy), with its note. err is for the transaction as a whole (closed store, driver
// error, ErrBusy); when it is not nil nothing was written and results is
// nil. A crash before the commit leaves every row Dispatching.
func (s *Store) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	f, err := s.frameAt(ctx, s.pool, "settle", latest(settlements))
	if err != nil {
		return nil, err
	}
	return s.dbSettle(ctx, f.settlementsIn(settlements))
}

// dbSettle is Settle on times in the store's frame (frame.go).
func (s *Store) dbSettle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	results := make([]error, len(settlements))
	var ids []turnframe.OutboxID
	for i, st := range settlements {
		if results[i] = st.Validate(); results[i] == nil {
			ids = append(ids, st.Claim.ID)
		}
	}
	if len(ids) == 0 {
		done, err := s.enter("settle")
		if err != nil {
			return nil, err
		}
		done()
		return results, nil
	}
	var out []error
	err := s.inTx(ctx, "settle", func(tx *wtx) error {
		out = append(out[:0], results...)
		return settleAll(ctx, tx, settlements, ids, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settleAll settles the valid settlements (those whose results[i] is nil,
// whose rows are ids) in tx, and sets each one's result.
func settleAll(ctx context.Context, tx *wtx, settlements []turnframe.OutboxSettlement, ids []turnframe.OutboxID, results []error) error {
	stored, err := lockOutboxRows(ctx, tx, ids)
	if err != nil {
		return err
	}
	var writes []settleWrite
	for i, st := range settlements {
		if results[i] != nil {
			continue
		}
		sw, refused := settleRow(st, stored)
		if refused != nil {
			results[i] = refused
			continue
		}
		writes = append(writes, sw)
	}
	if len(writes) == 0 {
		return nil
	}
	moves := make([][2]turnframe.OutboxRecord, len(writes))
	for k, sw := range writes {
		moves[k] = [2]turnframe.OutboxRecord{sw.row.rec, sw.next}
	}
	if err := lockAll(ctx, tx, orderLocks(moves...)); err != nil {
		return err
	}
	if err := writeSettlements(ctx, tx, writes); err != nil {
		return err
	}
	for _, sw := range writes {
		tx.record(storekit.RowHistory(sw.row.rec, sw.next, sw.actor, sw.note, sw.at))
		if err := keepOrder(ctx, tx, sw.row.seq, sw.row.rec, sw.next); err != nil {
			return err
		}
	}
	return nil
}

// settleWrite is a settlement the rule accepted, to be written: the row as
// stored before it and as storekit.SettleRow leaves it.
type settleWrite struct {
	row   outboxRow
	next  turnframe.OutboxRecord
	actor turnframe.Actor // who the audit trail says settled it (OutboxSettlement.SettledBy)
	note  string
	at    time.Time // the settlement's time, as stamped
}

// settleRow applies one settlement by storekit.SettleRow to the row as
// stored (and locked), which stored holds, and keeps the result there, so
// that a second settlement of the row in the batch meets it as it will be
// stored (and is refused: the claim is no longer held). refused is the
// settlement's own outcome (ErrClaimLost).
func settleRow(st turnframe.OutboxSettlement, stored map[turnframe.OutboxID]outboxRow) (_ settleWrite, refused error) {
	st.Now, st.RetryAt = stamp(st.Now), stamp(st.RetryAt)
	row, ok := stored[st.Claim.ID]
	if !ok {
		// A row that is gone (pruned after its claim was lost) holds no
		// claim: the settlement is refused like any other without one.
		return settleWrite{}, fmt.Errorf("pgstore: settle: outbox row %v does not exist: %w", st.Claim.ID, turnframe.ErrClaimLost)
	}
	next, err := storekit.SettleRow(row.rec, st)
	if err != nil {
		return settleWrite{}, fmt.Errorf("pgstore: settle: %w", err)
	}
	stored[st.Claim.ID] = outboxRow{seq: row.seq, rec: next}
	return settleWrite{row: row, next: next, actor: st.SettledBy(), note: st.Note, at: st.Now}, nil
}

// settleBatchSQL writes every settled row in one statement, each found by
// its seq; the rows are locked, and every column a transition may change is
// written (updateOutboxSQL's).
const settleBatchSQL = `UPDATE outbox AS o SET status = v.status, attempts = v.attempts, due_at = v.due_at,
		claimed_by = v.claimed_by, claimed_at = v.claimed_at, last_code = v.last_code, remote_ref = v.remote_ref,
		updated_at = v.updated_at, finished_at = v.finished_at, lease_until = v.lease_until, attempt_base = v.attempt_base
	FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::bigint[], $5::text[], $6::bigint[], $7::text[],
		$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::integer[])
		AS v(seq, status, attempts, due_at, claimed_by, claimed_at, last_code, remote_ref, updated_at,
			finished_at, lease_until, attempt_base)
	WHERE o.seq = v.seq`

// writeSettlements writes the rows of writes, one statement for all.
func writeSettlements(ctx context.Context, tx *wtx, writes []settleWrite) error {
	n := len(writes)
	var (
		seq, due, claimedAt, updated, finished, lease = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		status, claimedBy, code, ref                  = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		attempts, base                                = make([]int32, n), make([]int32, n)
	)
	for k, sw := range writes {
		r := sw.next
		seq[k], status[k], attempts[k], due[k] = sw.row.seq, r.Status.String(), int32(r.Attempts), micros(r.DueAt)
		claimedBy[k], claimedAt[k], code[k], ref[k] = r.ClaimedBy, micros(r.ClaimedAt), r.LastCode, r.RemoteRef
		updated[k], finished[k], lease[k], base[k] = micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), int32(r.AttemptBase)
	}
	tag, err := tx.Exec(ctx, settleBatchSQL, seq, status, attempts, due, claimedBy, claimedAt, code, ref, updated, finished, lease, base)
	if err != nil {
		return err
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("settle: %d rows written of %d locked", tag.RowsAffected(), n)
	}
	return nil
}

// extendSQL moves one row's lease, the one column storekit.ExtendRow
// changes (extendRow checks that). The row is locked.
const extendSQL = `UPDATE outbox SET lease_until = $1 WHERE seq = $2`

// ExtendClaims moves the lease of each claimed row to now + lease (to the
// microsecond), or leaves it when it already runs later
// (storekit.ExtendRow), all in one transaction, the rows locked first.
// results[i] is the outcome of claims[i] alone: nil, or ErrClaimLost,
// changing nothing of that row, unless it is still Dispatching under the
// claim's worker and attempt number (a lease that ended counts while no
// expiry took the row; a row that no longer exists holds no claim). err is
// for the call as a whole: ErrInvalid for a bad claim, a now out of range or
// a lease that is not positive (turnframe.CheckExtend, before anything is
// read), ErrClosed, ErrBusy, a context or driver error; when it is not nil
// nothing was written and results is nil. A crash before the commit leaves
// every lease as it was.
func (s *Store) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	f, err := s.frameAt(ctx, s.pool, "extend claims", now)
	if err != nil {
		return nil, err
	}
	return s.dbExtendClaims(ctx, f.claimsIn(claims), f.in(now), lease)
}

// dbExtendClaims is ExtendClaims on times in the store's frame (frame.go).
func (s *Store) dbExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if err := turnframe.CheckExtend(claims, now, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	if len(claims) == 0 {
		done, err := s.enter("extend claims")
		if err != nil {
			return nil, err
		}
		done()
		return make([]error, 0), nil
	}
	ids := make([]turnframe.OutboxID, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	var results []error
	err := s.inTx(ctx, "extend claims", func(tx *wtx) error {
		results = make([]error, len(claims))
		stored, err := lockOutboxRows(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, c := range claims {
			if results[i], err = extendRow(ctx, tx, c, now, lease, stored); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// extendRow applies storekit.ExtendRow to the row c claims, as stored
// holds it (and keeps it, for a claim twice in one call). refused is the
// claim's own outcome (ErrClaimLost); err fails the whole transaction.
func extendRow(ctx context.Context, tx *wtx, c turnframe.Claim, now time.Time, lease time.Duration, stored map[turnframe.OutboxID]outboxRow) (refused, err error) {
	row, ok := stored[c.ID]
	if !ok {
		return fmt.Errorf("pgstore: extend claims: outbox row %v does not exist: %w", c.ID, turnframe.ErrClaimLost), nil
	}
	next, err := storekit.ExtendRow(row.rec, c, now, lease)
	if err != nil {
		return fmt.Errorf("pgstore: extend claims: %w", err), nil
	}
	next.LeaseUntil = stamp(next.LeaseUntil)
	unchanged := next
	unchanged.LeaseUntil = row.rec.LeaseUntil
	if !sameRecord(unchanged, row.rec) {
		return nil, fmt.Errorf("row %v: storekit.ExtendRow changed more than the lease (%+v to %+v)", c.ID, row.rec, next)
	}
	if next.LeaseUntil.Equal(row.rec.LeaseUntil) {
		return nil, nil // the lease already runs that long: nothing to write
	}
	tx.queue(nil, extendSQL, micros(next.LeaseUntil), row.seq)
	stored[c.ID] = outboxRow{seq: row.seq, rec: next}
	return nil, nil
}
