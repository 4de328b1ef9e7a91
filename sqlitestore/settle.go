package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// Complete settles a claimed row Completed with the remote's reference.
// ErrInvalid for a bad claim or a zero now; ErrClaimLost, changing nothing,
// unless the row is still Dispatching under the claim's worker and attempt
// number (a row that no longer exists holds no claim either).
func (s *Store) Complete(ctx context.Context, claim turnframe.Claim, remoteRef string, now time.Time) error {
	return s.settleOne(ctx, turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxCompleted, RemoteRef: remoteRef, Now: now})
}

// Retry settles a claimed row back to Pending, due at at, keeping code. The
// row's update time is the claim's time: Retry takes no clock of its own.
// Errors as for Complete.
func (s *Store) Retry(ctx context.Context, claim turnframe.Claim, code string, at time.Time) error {
	return s.settleOne(ctx, turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxPending, Code: code, RetryAt: at, Now: claim.ClaimedAt})
}

// Fail settles a claimed row Failed with code. Errors as for Complete.
func (s *Store) Fail(ctx context.Context, claim turnframe.Claim, code string, now time.Time) error {
	return s.settleOne(ctx, turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxFailed, Code: code, Now: now})
}

// MarkUnknown settles a claimed row OutcomeUnknown: it is never claimed
// again until Resolve moves it. Errors as for Complete.
func (s *Store) MarkUnknown(ctx context.Context, claim turnframe.Claim, remoteRef string, now time.Time) error {
	return s.settleOne(ctx, turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxOutcomeUnknown, RemoteRef: remoteRef, Now: now})
}

func (s *Store) settleOne(ctx context.Context, st turnframe.OutboxSettlement) error {
	results, err := s.Settle(ctx, []turnframe.OutboxSettlement{st})
	if err != nil {
		return err
	}
	return results[0]
}

// Settle applies several settlements in one BEGIN IMMEDIATE transaction
// (group commit: one commit for all). results[i] is the outcome of
// settlements[i] alone: nil; ErrInvalid for a bad settlement (checked
// before the transaction); ErrClaimLost, changing nothing of that row,
// unless it is still Dispatching under the claim's worker and attempt
// number (a row settled twice in one batch loses the second time, and a
// row that no longer exists holds no claim). One refused settlement does not refuse the
// others. err is for the transaction as a whole (closed store, driver
// error, ErrBusy); when it is not nil nothing was written and results is
// nil. A crash before the commit leaves every row Dispatching.
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
		return nil, fail(ctx, "settle", err)
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
		return nil, fail(ctx, "settle", err)
	}
	for i, st := range settlements {
		if results[i] != nil {
			continue
		}
		refused, err := settleRow(ctx, w, st, stored)
		if err != nil {
			return nil, fail(ctx, "settle", err)
		}
		results[i] = refused
	}
	if err := tx.Commit(); err != nil {
		return nil, fail(ctx, "settle: commit", err)
	}
	return results, nil
}

// settleRow applies one settlement by turnframe.SettleRow to the row as
// stored, which stored holds (read by readOutboxRows in this transaction,
// and kept up to date by settleRow as it writes). refused is the
// settlement's own outcome (ErrClaimLost); err fails the whole transaction.
func settleRow(ctx context.Context, tx *wtx, st turnframe.OutboxSettlement, stored map[turnframe.OutboxID]outboxRow) (refused, err error) {
	st.Now, st.RetryAt = stamp(st.Now), stamp(st.RetryAt)
	row, ok := stored[st.Claim.ID]
	if !ok {
		// A row that is gone (pruned after its claim was lost) holds no
		// claim: the settlement is refused like any other without one.
		return fmt.Errorf("sqlitestore: settle: outbox row %v does not exist: %w", st.Claim.ID, turnframe.ErrClaimLost), nil
	}
	next, err := turnframe.SettleRow(row.rec, st)
	if err != nil {
		return fmt.Errorf("sqlitestore: settle: %w", err), nil
	}
	// The fence, again in the statement: still Dispatching, same worker,
	// same attempt. Matching (worker, attempt) alone would also match a row
	// that was already settled.
	res, err := tx.ExecContext(ctx, settleOutboxSQL,
		append(updateOutboxArgs(row.seq, next), st.Claim.Worker, st.Claim.Attempts)...)
	if err != nil {
		return nil, translate(ctx, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != 1 {
		return fmt.Errorf("sqlitestore: settle: row %v: %w", st.Claim.ID, turnframe.ErrClaimLost), nil
	}
	// The row is now next (the columns not written are as read; the held
	// mark keepOrder may change is no part of a record): a second
	// settlement of it in this batch meets it as stored.
	stored[st.Claim.ID] = outboxRow{seq: row.seq, rec: next}
	return nil, keepOrder(ctx, tx, row.seq, row.rec, next)
}

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
	last_code = ?, remote_ref = ?, updated_at = ?, finished_at = ? WHERE seq = ?`

// settleOutboxSQL is updateOutboxSQL fenced on the claim: the row is still
// Dispatching under the claim's worker and attempt number, given after
// updateOutboxArgs.
const settleOutboxSQL = updateOutboxSQL + ` AND status = 'dispatching' AND claimed_by = ? AND attempts = ?`

func updateOutboxArgs(seq int64, r turnframe.OutboxRecord) []any {
	return []any{r.Status.String(), r.Attempts, micros(r.DueAt), r.ClaimedBy, micros(r.ClaimedAt),
		r.LastCode, r.RemoteRef, micros(r.UpdatedAt), micros(r.FinishedAt), seq}
}

const findOutboxSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE id = ?`

func findOutbox(ctx context.Context, q querier, id turnframe.OutboxID) (outboxRow, error) {
	row, err := scanOutbox(q.QueryRowContext(ctx, findOutboxSQL, id.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return row, fmt.Errorf("outbox row %v: %w", id, turnframe.ErrNotFound)
	}
	return row, translate(ctx, err)
}
