package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// Settle applies several settlements in one BEGIN IMMEDIATE transaction
// (group commit: one commit for all), each by storekit.SettleRow: the
// sender's code becomes the row's last code, whatever the status, and the
// lease is cleared. results[i] is the outcome of settlements[i] alone: nil;
// ErrInvalid for a bad settlement (checked before the transaction);
// ErrClaimLost, changing nothing of that row, unless it is still
// Dispatching under the claim's worker and attempt number (a row settled
// twice in one batch loses the second time, and a row that no longer
// exists holds no claim). One refused settlement does not refuse the
// others. Each settlement that lands is recorded in the audit trail as
// OutboxSettlement.SettledBy names it (its claim's worker, unless it names
// ActorPolicy), with its note. err is for the transaction
// as a whole (closed store, driver error, ErrBusy); when it is not nil
// nothing was written and results is nil. A crash before the commit leaves
// every row Dispatching.
func (s *Store) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	results := make([]error, len(settlements))
	valid := 0
	for i, st := range settlements {
		if results[i] = st.Validate(); results[i] == nil {
			valid++
		}
	}
	done, err := s.enter("settle")
	if err != nil {
		return nil, err
	}
	defer done()
	if valid == 0 {
		return results, nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, "settle", err)
	}
	defer tx.Rollback()
	w := s.wrap(tx)
	ids := make([]turnframe.OutboxID, 0, valid)
	for i, st := range settlements {
		if results[i] == nil {
			ids = append(ids, st.Claim.ID)
		}
	}
	stored, err := readOutboxRows(ctx, w, ids)
	if err != nil {
		return nil, s.fail(ctx, "settle", err)
	}
	writes := make([]settleWrite, 0, valid)
	for i, st := range settlements {
		if results[i] != nil {
			continue
		}
		sw, refused := settleRow(st, stored)
		if refused != nil {
			results[i] = refused
			continue
		}
		sw.i = i
		writes = append(writes, sw)
	}
	landed, err := writeSettlements(ctx, w, writes)
	if err != nil {
		return nil, s.fail(ctx, "settle", err)
	}
	for k, sw := range writes {
		if !landed[k] {
			results[sw.i] = fmt.Errorf("sqlitestore: settle: row %v: %w", sw.next.ID, turnframe.ErrClaimLost)
			continue
		}
		w.record(storekit.RowHistory(sw.row.rec, sw.next, sw.actor, sw.note, sw.at))
		if err := keepOrder(ctx, w, sw.row.seq, sw.row.rec, sw.next); err != nil {
			return nil, s.fail(ctx, "settle", err)
		}
	}
	if err := w.flushHistory(ctx); err != nil {
		return nil, s.fail(ctx, "settle", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.fail(ctx, "settle: commit", err)
	}
	return results, nil
}

// settleWrite is a settlement the rule accepted, to be written: the row as
// stored before it and as storekit.SettleRow leaves it, and the claim's
// fence.
type settleWrite struct {
	i        int // the settlement's place in the batch
	row      outboxRow
	next     turnframe.OutboxRecord
	worker   string
	attempts int
	actor    turnframe.Actor // who the audit trail says settled it (OutboxSettlement.SettledBy)
	note     string
	at       time.Time // the settlement's time, as stamped
}

// settleRow applies one settlement by storekit.SettleRow to the row as
// stored, which stored holds (read by readOutboxRows in this transaction),
// and keeps the result there, so that a second settlement of the row in
// the batch meets it as it will be stored (and is refused: the claim is no
// longer held). refused is the settlement's own outcome (ErrClaimLost).
func settleRow(st turnframe.OutboxSettlement, stored map[turnframe.OutboxID]outboxRow) (_ settleWrite, refused error) {
	st.Now, st.RetryAt = stamp(st.Now), stamp(st.RetryAt)
	row, ok := stored[st.Claim.ID]
	if !ok {
		// A row that is gone (pruned after its claim was lost) holds no
		// claim: the settlement is refused like any other without one.
		return settleWrite{}, fmt.Errorf("sqlitestore: settle: outbox row %v does not exist: %w", st.Claim.ID, turnframe.ErrClaimLost)
	}
	next, err := storekit.SettleRow(row.rec, st)
	if err != nil {
		return settleWrite{}, fmt.Errorf("sqlitestore: settle: %w", err)
	}
	// The columns not written are as read; the held mark keepOrder may
	// change is no part of a record.
	stored[st.Claim.ID] = outboxRow{seq: row.seq, rec: next}
	return settleWrite{row: row, next: next, worker: st.Claim.Worker, attempts: st.Claim.Attempts,
		actor: st.SettledBy(), note: st.Note, at: st.Now}, nil
}

// writeSettlements writes the rows of writes, each fenced again in the
// statement on the claim (still Dispatching, same worker, same attempt:
// matching worker and attempt alone would also match a row already
// settled), and reports which landed. A settlement changes only the
// columns settleBatchSQL writes (settleColumnsOnly), so the rows are
// written several per statement, as the history is; a row whose rule ever
// changed another column is written whole, alone.
func writeSettlements(ctx context.Context, tx *wtx, writes []settleWrite) ([]bool, error) {
	landed := make([]bool, len(writes))
	var batch []int // indexes into writes, for settleBatchSQL
	for k, sw := range writes {
		if settleColumnsOnly(sw.row.rec, sw.next) {
			batch = append(batch, k)
			continue
		}
		res, err := tx.ExecContext(ctx, settleOutboxSQL, append(updateOutboxArgs(sw.row.seq, sw.next), sw.worker, sw.attempts)...)
		if err != nil {
			return nil, translate(ctx, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		landed[k] = n == 1
	}
	bySeq := make(map[int64]int, len(batch)) // a row is settled at most once: a second settlement is refused by the rule
	args := make([]any, 0, settleBatchArity*min(len(batch), batchSizes[0]))
	for len(batch) > 0 {
		n := batchSize(len(batch))
		args = args[:0]
		clear(bySeq)
		for _, k := range batch[:n] {
			sw := writes[k]
			r := sw.next
			args = append(args, sw.row.seq, r.Status.String(), micros(r.DueAt), r.LastCode, r.RemoteRef,
				micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), sw.worker, sw.attempts)
			bySeq[sw.row.seq] = k
		}
		rows, err := tx.QueryContext(ctx, settleBatchSQLs[n], args...)
		if err != nil {
			return nil, translate(ctx, err)
		}
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return nil, translate(ctx, err)
			}
			if k, ok := bySeq[seq]; ok {
				landed[k] = true
			}
		}
		if err := rows.Close(); err != nil {
			return nil, translate(ctx, err)
		}
		if err := rows.Err(); err != nil {
			return nil, translate(ctx, err)
		}
		batch = batch[n:]
	}
	return landed, nil
}

// settleColumnsOnly reports whether next, what storekit.SettleRow made of
// r, differs from r in no column but those settleBatchSQL writes: status,
// due time, last code, remote reference, update and finish times, lease.
func settleColumnsOnly(r, next turnframe.OutboxRecord) bool {
	r.Status, r.DueAt, r.LastCode, r.RemoteRef = next.Status, next.DueAt, next.LastCode, next.RemoteRef
	r.UpdatedAt, r.FinishedAt, r.LeaseUntil = next.UpdatedAt, next.FinishedAt, next.LeaseUntil
	return sameRecord(r, next)
}

// settleBatchArity is how many values settleBatchSQL binds per row.
const settleBatchArity = 10

// settleBatchSQL returns the UPDATE of n settled rows, one statement: each
// row of the VALUES list is (seq, status, due_at, last_code, remote_ref,
// updated_at, finished_at, lease_until, worker, attempts), the last two
// the claim's fence, and the rows it wrote come back by seq. Each row is
// found by its seq (plan_test).
func settleBatchSQL(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", settleBatchArity), ", ") + ")"
	return `UPDATE outbox SET status = v.column2, due_at = v.column3, last_code = v.column4, remote_ref = v.column5,
		updated_at = v.column6, finished_at = v.column7, lease_until = v.column8
	FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + `) AS v
	WHERE outbox.seq = v.column1 AND outbox.status = 'dispatching' AND outbox.claimed_by = v.column9
	  AND outbox.attempts = v.column10
	RETURNING seq`
}

// settleBatchSQLs are the prepared statements' texts, by batch size (the
// sizes of batchSizes).
var settleBatchSQLs = func() map[int]string {
	m := make(map[int]string, len(batchSizes))
	for _, n := range batchSizes {
		m[n] = settleBatchSQL(n)
	}
	return m
}()

// readBatch is how many ids readOutboxSQL takes.
const readBatch = 16

// readOutboxSQL reads the rows of up to readBatch ids through the id index;
// unused places are bound to the empty string, which no id is.
const readOutboxSQL = `SELECT ` + outboxCols + ` FROM outbox
	WHERE id IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// readOutboxRows reads the rows of ids, readBatch at a time: one statement
// (and one result set) instead of one per row. A missing id is absent from
// the map.
func readOutboxRows(ctx context.Context, tx *wtx, ids []turnframe.OutboxID) (map[turnframe.OutboxID]outboxRow, error) {
	out := make(map[turnframe.OutboxID]outboxRow, len(ids))
	args := make([]any, readBatch)
	for len(ids) > 0 {
		n := min(readBatch, len(ids))
		for i := range args {
			args[i] = ""
			if i < n {
				args[i] = ids[i].String()
			}
		}
		rows, err := scanOutboxRows(tx.QueryContext(ctx, readOutboxSQL, args...))
		if err != nil {
			return nil, translate(ctx, err)
		}
		for _, r := range rows {
			out[r.rec.ID] = r
		}
		ids = ids[n:]
	}
	return out, nil
}

// updateOutboxSQL writes every column a transition may change; the caller
// appends the rest of the WHERE clause.
const updateOutboxSQL = `UPDATE outbox SET status = ?, attempts = ?, due_at = ?, claimed_by = ?, claimed_at = ?,
	last_code = ?, remote_ref = ?, updated_at = ?, finished_at = ?, lease_until = ?, attempt_base = ? WHERE seq = ?`

// settleOutboxSQL is updateOutboxSQL fenced on the claim: the row is still
// Dispatching under the claim's worker and attempt number, given after
// updateOutboxArgs.
const settleOutboxSQL = updateOutboxSQL + ` AND status = 'dispatching' AND claimed_by = ? AND attempts = ?`

func updateOutboxArgs(seq int64, r turnframe.OutboxRecord) []any {
	return []any{r.Status.String(), r.Attempts, micros(r.DueAt), r.ClaimedBy, micros(r.ClaimedAt),
		r.LastCode, r.RemoteRef, micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), r.AttemptBase, seq}
}

const findOutboxSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE id = ?`

func findOutbox(ctx context.Context, q querier, id turnframe.OutboxID) (outboxRow, error) {
	row, err := scanOutbox(q.QueryRowContext(ctx, findOutboxSQL, id.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return row, fmt.Errorf("outbox row %v: %w", id, turnframe.ErrNotFound)
	}
	return row, translate(ctx, err)
}

// extendSQL moves one row's lease, fenced like settleOutboxSQL: the row is
// still Dispatching under the claim's worker and attempt number. It writes
// lease_until alone, the one column storekit.ExtendRow changes (extendRow
// checks that), so no index but the lease's is touched.
const extendSQL = `UPDATE outbox SET lease_until = ?1
	WHERE seq = ?2 AND status = 'dispatching' AND claimed_by = ?3 AND attempts = ?4`

// ExtendClaims moves the lease of each claimed row to now + lease (to the
// microsecond), or leaves it when it already runs later
// (storekit.ExtendRow), all in one BEGIN IMMEDIATE transaction.
// results[i] is the outcome of claims[i] alone: nil, or ErrClaimLost,
// changing nothing of that row, unless it is still Dispatching under the
// claim's worker and attempt number (a lease that ended counts while no
// release took the row; a row that no longer exists holds no claim). err is
// for the call as a whole: ErrInvalid for a bad claim, a now out of range or
// a lease that is not positive (turnframe.CheckExtend, before anything is
// read), ErrClosed, ErrBusy, a context or driver error; when it is not nil
// nothing was written and results is nil. A crash before the commit leaves
// every lease as it was.
func (s *Store) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if err := turnframe.CheckExtend(claims, now, lease); err != nil {
		return nil, err
	}
	now = stamp(now)
	done, err := s.enter("extend claims")
	if err != nil {
		return nil, err
	}
	defer done()
	results := make([]error, len(claims))
	if len(claims) == 0 {
		return results, nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, "extend claims", err)
	}
	defer tx.Rollback()
	w := s.wrap(tx)
	ids := make([]turnframe.OutboxID, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	stored, err := readOutboxRows(ctx, w, ids)
	if err != nil {
		return nil, s.fail(ctx, "extend claims", err)
	}
	for i, c := range claims {
		if results[i], err = extendRow(ctx, w, c, now, lease, stored); err != nil {
			return nil, s.fail(ctx, "extend claims", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, s.fail(ctx, "extend claims: commit", err)
	}
	return results, nil
}

// extendRow applies storekit.ExtendRow to the row c claims, as stored
// holds it (and keeps it, for a claim twice in one call). refused is the
// claim's own outcome (ErrClaimLost); err fails the whole transaction.
func extendRow(ctx context.Context, tx *wtx, c turnframe.Claim, now time.Time, lease time.Duration, stored map[turnframe.OutboxID]outboxRow) (refused, err error) {
	row, ok := stored[c.ID]
	if !ok {
		return fmt.Errorf("sqlitestore: extend claims: outbox row %v does not exist: %w", c.ID, turnframe.ErrClaimLost), nil
	}
	next, err := storekit.ExtendRow(row.rec, c, now, lease)
	if err != nil {
		return fmt.Errorf("sqlitestore: extend claims: %w", err), nil
	}
	next.LeaseUntil = stamp(next.LeaseUntil)
	if unchanged := withLease(next, row.rec.LeaseUntil); !sameRecord(unchanged, row.rec) {
		return nil, fmt.Errorf("row %v: storekit.ExtendRow changed more than the lease (%+v to %+v)", c.ID, row.rec, next)
	}
	if next.LeaseUntil.Equal(row.rec.LeaseUntil) {
		return nil, nil // the lease already runs that long: nothing to write
	}
	res, err := tx.ExecContext(ctx, extendSQL, micros(next.LeaseUntil), row.seq, c.Worker, c.Attempts)
	if err != nil {
		return nil, translate(ctx, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != 1 {
		return fmt.Errorf("sqlitestore: extend claims: row %v: %w", c.ID, turnframe.ErrClaimLost), nil
	}
	stored[c.ID] = outboxRow{seq: row.seq, rec: next}
	return nil, nil
}

// withLease returns r with its lease ending at until.
func withLease(r turnframe.OutboxRecord, until time.Time) turnframe.OutboxRecord {
	r.LeaseUntil = until
	return r
}
