package sqlitestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
)

// Resolve settles an OutcomeUnknown row by verdict (turnframe.ResolveRow):
// Completed, Failed (with code) or Pending due at now (resend). ErrInvalid
// for a zero id, VerdictUnresolved, a bad code or a zero now; ErrNotFound
// for no such row; ErrConflict, changing nothing, for a row in any other
// status.
func (s *Store) Resolve(ctx context.Context, id turnframe.OutboxID, v turnframe.Verdict, code string, now time.Time) error {
	if err := turnframe.CheckResolve(id, v, code, now); err != nil {
		return err
	}
	now = stamp(now)
	return s.inTx(ctx, "resolve", func(tx *wtx) error {
		return moveOutbox(ctx, tx, id, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return turnframe.ResolveRow(r, v, code, now)
		})
	})
}

// Requeue moves a Failed row back to Pending, due at at, for an operator
// (turnframe.RequeueRow: a fresh attempt budget, its AttemptBase set to its
// attempts so far, which keep rising). ErrInvalid for a zero id or an at
// out of range (turnframe.CheckTime); ErrNotFound for no such row;
// ErrConflict, changing nothing, for a row in any other status.
func (s *Store) Requeue(ctx context.Context, id turnframe.OutboxID, at time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckTime("at", at); err != nil {
		return err
	}
	at = stamp(at)
	return s.inTx(ctx, "requeue", func(tx *wtx) error {
		return moveOutbox(ctx, tx, id, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return turnframe.RequeueRow(r, at)
		})
	})
}

// moveOutbox loads row id, applies rule to it and stores the result.
func moveOutbox(ctx context.Context, tx *wtx, id turnframe.OutboxID, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	row, err := findOutbox(ctx, tx, id)
	if err != nil {
		return err
	}
	return storeMove(ctx, tx, row, rule)
}

// storeMove applies rule to row, as stored, and stores the result, with the
// held marks of its order key.
func storeMove(ctx context.Context, tx *wtx, row outboxRow, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	next, err := rule(row.rec)
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, updateOutboxSQL, updateOutboxArgs(row.seq, next)...); err != nil {
		return translate(ctx, err)
	}
	return keepOrder(ctx, tx, row.seq, row.rec, next)
}

// releaseSQL reads the claims whose lease ended at ?1 through the partial
// index of Dispatching rows by lease end (outbox_leases), so its cost
// follows the ended leases, not the table. It restates the test of
// turnframe.LeaseEnded, which ReleaseExpiredClaims applies again to every
// row it reads. It has no ORDER BY: with one, SQLite prefers to walk the
// whole table in seq order.
const releaseSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE status = 'dispatching' AND lease_until <= ?1`

// pruneSQL deletes through the partial index of finished rows.
const pruneSQL = `DELETE FROM outbox WHERE status IN ('completed', 'failed') AND finished_at < ? RETURNING ` + outboxCols

// ReleaseExpiredClaims moves every Dispatching row whose lease ended at now
// (turnframe.LeaseEnded: its lease end is not after now) back to Pending
// (turnframe.ReleaseRow: attempts and due time kept, lease cleared, updated
// at now) and returns their ids in enqueue order; none when no lease ended.
// A lease still running is never released. It reads only Dispatching rows
// whose lease ended. ErrInvalid for a now out of range (turnframe.CheckTime).
// A worker that still holds a released claim loses it: its settlement and
// its extension are ErrClaimLost. A crash before the commit releases
// nothing.
func (s *Store) ReleaseExpiredClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return nil, err
	}
	now = stamp(now)
	var ids []turnframe.OutboxID
	err := s.inTx(ctx, "release expired claims", func(tx *wtx) error {
		rows, err := scanOutboxRows(tx.QueryContext(ctx, releaseSQL, micros(now)))
		if err != nil {
			return translate(ctx, err)
		}
		slices.SortFunc(rows, func(a, b outboxRow) int { return cmp.Compare(a.seq, b.seq) })
		for _, row := range rows {
			if !turnframe.LeaseEnded(row.rec, now) {
				return fmt.Errorf("row %v read as an ended lease, but turnframe.LeaseEnded says it runs until %v",
					row.rec.ID, row.rec.LeaseUntil)
			}
			if err := storeMove(ctx, tx, row, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
				return turnframe.ReleaseRow(r, now)
			}); err != nil {
				return err
			}
			ids = append(ids, row.rec.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ReleaseClaim moves the Dispatching row id back to Pending at now, whether
// or not its lease ended (turnframe.ReleaseRow: attempts and due time kept,
// lease cleared), for an operator who knows its worker is gone. If that
// worker is in fact still sending, the row may be sent twice, under the
// same key; the worker's settlement is then ErrClaimLost. ErrInvalid for a
// zero id or a now out of range; ErrNotFound for no such row; ErrConflict,
// changing nothing, for a row that is not Dispatching. A crash before the
// commit releases nothing.
func (s *Store) ReleaseClaim(ctx context.Context, id turnframe.OutboxID, now time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckTime("now", now); err != nil {
		return err
	}
	now = stamp(now)
	return s.inTx(ctx, "release claim", func(tx *wtx) error {
		return moveOutbox(ctx, tx, id, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return turnframe.ReleaseRow(r, now)
		})
	})
}

// Prune deletes Completed and Failed rows finished before finishedBefore
// and returns how many. It reads only finished rows and never touches the
// journal: a key keeps deduplicating after its rows are gone. ErrInvalid for
// a zero finishedBefore.
func (s *Store) Prune(ctx context.Context, finishedBefore time.Time) (int, error) {
	if err := turnframe.CheckTime("finished_before", finishedBefore); err != nil {
		return 0, err
	}
	finishedBefore = stamp(finishedBefore)
	n := 0
	err := s.inTx(ctx, "prune", func(tx *wtx) error {
		rows, err := scanOutboxRows(tx.QueryContext(ctx, pruneSQL, micros(finishedBefore)))
		if err != nil {
			return err
		}
		// The statement restates turnframe.Prunable; a row it deleted that
		// the rule keeps rolls the prune back.
		for _, row := range rows {
			if !turnframe.Prunable(row.rec, finishedBefore) {
				return fmt.Errorf("row %v deleted, but turnframe.Prunable keeps it", row.rec.ID)
			}
		}
		n = len(rows)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// GetOutbox returns one row, whatever its account. ErrInvalid for a zero
// id; ErrNotFound if it does not exist (or was pruned).
func (s *Store) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	if err := turnframe.CheckID("id", id); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	done, err := s.enter("get outbox")
	if err != nil {
		return turnframe.OutboxRecord{}, err
	}
	defer done()
	row, err := findOutbox(ctx, s.read, id)
	if err != nil {
		return turnframe.OutboxRecord{}, s.fail(ctx, "get outbox", err)
	}
	return row.rec, nil
}

// ListOutbox returns at most filter.Limit rows matching filter, in enqueue
// order. ErrInvalid for a bad filter.
func (s *Store) ListOutbox(ctx context.Context, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	done, err := s.enter("list outbox")
	if err != nil {
		return nil, err
	}
	defer done()
	query, args := `SELECT `+outboxCols+` FROM outbox WHERE 1`, []any{}
	if filter.Status != 0 {
		query += ` AND status = ?`
		args = append(args, filter.Status.String())
	}
	if filter.Account != "" {
		query += ` AND account = ?`
		args = append(args, string(filter.Account))
	}
	query += ` ORDER BY seq LIMIT ?`
	args = append(args, filter.Limit)
	rows, err := scanOutboxRows(s.read.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, s.fail(ctx, "list outbox", err)
	}
	var out []turnframe.OutboxRecord
	for _, r := range rows {
		out = append(out, r.rec)
	}
	return out, nil
}
