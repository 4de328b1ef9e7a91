package sqlitestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// Resolve settles an OutcomeUnknown or NeedsIntervention row by
// storekit.ResolveRow, recorded in the audit trail as res.Actor with
// res.Note: an OutcomeUnknown row by any verdict (Escalate moves it to
// NeedsIntervention), a NeedsIntervention row by Completed, Failed or
// Resend and only for an actor that MayIntervene. res.RemoteRef, when not
// empty, becomes the row's. ErrInvalid for bad input
// (turnframe.Resolution.Validate, before any transaction); ErrNotFound for
// no such row; ErrConflict, changing nothing, for a row in another status,
// or one that needs intervention and an actor that may not intervene.
func (s *Store) Resolve(ctx context.Context, res turnframe.Resolution) error {
	if err := res.Validate(); err != nil {
		return err
	}
	res.Now = stamp(res.Now)
	return s.inTx(ctx, "resolve", func(tx *wtx) error {
		return moveOutbox(ctx, tx, res.ID, res.Actor, res.Note, res.Now, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return storekit.ResolveRow(r, res)
		})
	})
}

// Requeue moves a Failed row back to Pending, due at at, for an operator
// (storekit.RequeueRow: a fresh attempt budget, its AttemptBase set to its
// attempts so far, which keep rising), recorded as turnframe.ActorOperator.
// attempts, when not zero, fences it in the same transaction: the row must
// still be failed at that many attempts, as the operator saw it.
// ErrInvalid for a zero id, a negative attempts or an at out of range
// (turnframe.CheckTime); ErrNotFound for no such row; ErrConflict, changing
// nothing, for a row in any other status or at other attempts.
func (s *Store) Requeue(ctx context.Context, id turnframe.OutboxID, attempts int, at time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckFence("attempts", attempts); err != nil {
		return err
	}
	if err := turnframe.CheckTime("at", at); err != nil {
		return err
	}
	at = stamp(at)
	return s.inTx(ctx, "requeue", func(tx *wtx) error {
		return moveOutbox(ctx, tx, id, turnframe.ActorOperator, "", at, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return storekit.RequeueRow(r, attempts, at)
		})
	})
}

// moveOutbox loads row id, applies rule to it, stores the result and
// records the move as actor with note at now.
func moveOutbox(ctx context.Context, tx *wtx, id turnframe.OutboxID, actor turnframe.Actor, note string, now time.Time, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	row, err := findOutbox(ctx, tx, id)
	if err != nil {
		return err
	}
	return storeMove(ctx, tx, row, actor, note, now, rule)
}

// storeMove applies rule to row, as stored, stores the result, with the
// held marks of its order key, and records the move as actor with note at
// now.
func storeMove(ctx context.Context, tx *wtx, row outboxRow, actor turnframe.Actor, note string, now time.Time, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	next, err := rule(row.rec)
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, updateOutboxSQL, updateOutboxArgs(row.seq, next)...); err != nil {
		return translate(ctx, err)
	}
	tx.record(storekit.RowHistory(row.rec, next, actor, note, now))
	return keepOrder(ctx, tx, row.seq, row.rec, next)
}

// expireSQL reads the claims whose lease ended at ?1 through the partial
// index of Dispatching rows by lease end (outbox_leases), so its cost
// follows the ended leases, not the table. It restates the test of
// turnframe.LeaseEnded, which ExpireClaims applies again to every row it
// reads (through storekit.ExpireRow). It has no ORDER BY: with one, SQLite
// prefers to walk the whole table in seq order.
const expireSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE status = 'dispatching' AND lease_until <= ?1`

// prunableRows are the rows one batch of Prune deletes: at most ?2
// (storekit.PruneBatch) rows finished before ?1, oldest first, read through
// the partial index of finished rows (outbox_finished, whose entries end
// with the rowid, seq: no sort). The order is total, so pruneHistorySQL and
// pruneSQL, run in one transaction, pick the same rows.
const prunableRows = `FROM outbox WHERE status IN ('completed', 'failed') AND finished_at < ?1
	ORDER BY finished_at, seq LIMIT ?2`

// pruneSQL deletes one batch of Prune's rows by seq and returns of each
// only what storekit.Prunable needs and what names it: never its payload.
const pruneSQL = `DELETE FROM outbox WHERE seq IN (SELECT seq ` + prunableRows + `)
	RETURNING id, account, status, finished_at`

// ExpireClaims moves every Dispatching row whose lease ended at now
// (turnframe.LeaseEnded: its lease end is not after now) to OutcomeUnknown
// by storekit.ExpireRow (code turnframe.CodeLeaseEnded, attempts, due
// time and claim kept, lease cleared, updated at now), recorded as
// turnframe.ActorRecovery, all in one transaction, and returns their ids in
// enqueue order; none when no lease ended. The send of an expired row may
// have started, so it is never claimed again until Resolve moves it, and it
// still holds its order key. A lease still running is never touched. It
// reads only Dispatching rows whose lease ended. ErrInvalid for a now out
// of range (turnframe.CheckTime). A worker that still holds an expired
// claim loses it: its settlement and its extension are ErrClaimLost. A
// crash before the commit expires nothing.
func (s *Store) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return nil, err
	}
	now = stamp(now)
	var ids []turnframe.OutboxID
	err := s.inTx(ctx, "expire claims", func(tx *wtx) error {
		rows, err := scanOutboxRows(tx.QueryContext(ctx, expireSQL, micros(now)))
		if err != nil {
			return translate(ctx, err)
		}
		slices.SortFunc(rows, func(a, b outboxRow) int { return cmp.Compare(a.seq, b.seq) })
		for _, row := range rows {
			if !turnframe.LeaseEnded(row.rec, now) {
				return fmt.Errorf("row %v read as an ended lease, but turnframe.LeaseEnded says it is %v until %v",
					row.rec.ID, row.rec.Status, row.rec.LeaseUntil)
			}
			if err := storeMove(ctx, tx, row, turnframe.ActorRecovery, "", now, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
				return storekit.ExpireRow(r, now)
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
// or not its lease ended (storekit.ReleaseRow: attempts and due time kept,
// lease cleared), for an operator who knows its worker is gone, recorded as
// turnframe.ActorOperator. If that worker is in fact still sending, the row
// may be sent twice, under the same key; the worker's settlement is then
// ErrClaimLost. attempts, when not zero, fences it in the same
// transaction: the row must still be under the claim of that attempt
// number, the one the operator saw. ErrInvalid for a zero id, a negative
// attempts or a now out of range; ErrNotFound for no such row; ErrConflict,
// changing nothing, for a row that is not Dispatching or is under another
// claim. A crash before the commit releases nothing.
func (s *Store) ReleaseClaim(ctx context.Context, id turnframe.OutboxID, attempts int, now time.Time) error {
	if err := turnframe.CheckID("id", id); err != nil {
		return err
	}
	if err := turnframe.CheckFence("attempts", attempts); err != nil {
		return err
	}
	if err := turnframe.CheckTime("now", now); err != nil {
		return err
	}
	now = stamp(now)
	return s.inTx(ctx, "release claim", func(tx *wtx) error {
		return moveOutbox(ctx, tx, id, turnframe.ActorOperator, "", now, func(r turnframe.OutboxRecord) (turnframe.OutboxRecord, error) {
			return storekit.ReleaseRow(r, attempts, now)
		})
	})
}

// Prune deletes Completed and Failed rows finished before finishedBefore,
// with their history, and returns how many. It reads only finished rows and
// never touches the journal or its history, nor a turn's: a key keeps
// deduplicating after its rows are gone. ErrInvalid for a zero
// finishedBefore.
//
// It deletes in batches of storekit.PruneBatch rows, oldest first, each
// with its rows' history in a write transaction of its own, and reads no
// payload: a large prune holds the file's write lock one batch at a time,
// and the application's writes go in between. Each batch is whole on its
// own: a crash between batches leaves a consistent file with fewer rows
// pruned, and an error returns, with it, the count of the rows the batches
// before it pruned; the rows of the batch that failed are kept, with their
// history.
func (s *Store) Prune(ctx context.Context, finishedBefore time.Time) (int, error) {
	if err := turnframe.CheckTime("finished_before", finishedBefore); err != nil {
		return 0, err
	}
	finishedBefore = stamp(finishedBefore)
	return storekit.PruneInBatches(func() (int, error) { return s.pruneBatch(ctx, finishedBefore) })
}

// pruneBatch deletes, in one transaction, the next batch of Prune's rows
// and their history, and returns how many it deleted; none on an error.
func (s *Store) pruneBatch(ctx context.Context, finishedBefore time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, "prune", func(tx *wtx) error {
		// The history first: its statement finds the rows as pruneSQL
		// does, so it must run while they are there.
		if _, err := tx.ExecContext(ctx, pruneHistorySQL, micros(finishedBefore), storekit.PruneBatch); err != nil {
			return translate(ctx, err)
		}
		rows, err := tx.QueryContext(ctx, pruneSQL, micros(finishedBefore), storekit.PruneBatch)
		if err != nil {
			return translate(ctx, err)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanPruned(rows)
			if err != nil {
				return err
			}
			// The statement restates storekit.Prunable; a row it deleted
			// that the rule keeps rolls the batch back.
			if !storekit.Prunable(r, finishedBefore) {
				return fmt.Errorf("row %v deleted, but storekit.Prunable keeps it", r.ID)
			}
			n++
		}
		return translate(ctx, rows.Err())
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// scanPruned reads a row pruneSQL returns: of the record, only its id,
// account, status and finish time.
func scanPruned(sc scanner) (turnframe.OutboxRecord, error) {
	var (
		r                   turnframe.OutboxRecord
		id, account, status string
		fin                 int64
	)
	err := sc.Scan(&id, &account, &status, &fin)
	if err != nil {
		return r, err
	}
	if r.ID, err = parseID("outbox id", id, turnframe.ParseOutboxID); err != nil {
		return r, err
	}
	if r.Status, err = turnframe.ParseOutboxStatus(status); err != nil {
		return r, fmt.Errorf("stored outbox status: %w", err)
	}
	r.Account, r.FinishedAt = turnframe.AccountID(account), fromMicros(fin)
	return r, nil
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
	row, err := findOutbox(ctx, s.reads, id)
	if err != nil {
		return turnframe.OutboxRecord{}, s.fail(ctx, "get outbox", err)
	}
	return row.rec, nil
}

// ListOutbox returns at most filter.Limit rows matching filter, in enqueue
// order; with filter.After, only rows enqueued after that one (the last
// row of the page before). ErrInvalid for a bad filter; ErrNotFound for an
// After row that does not exist (pruned, or never enqueued) or, with
// filter.Account, belongs to another account: a cursor never reveals that
// another tenant's row exists.
func (s *Store) ListOutbox(ctx context.Context, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	done, err := s.enter("list outbox")
	if err != nil {
		return nil, err
	}
	defer done()
	var afterSeq int64
	if !filter.After.IsZero() {
		after, err := findOutbox(ctx, s.reads, filter.After)
		if err == nil && filter.Account != "" && after.rec.Account != filter.Account {
			err = fmt.Errorf("outbox row %v: %w", filter.After, turnframe.ErrNotFound)
		}
		if err != nil {
			return nil, s.fail(ctx, "list outbox", err)
		}
		afterSeq = after.seq
	}
	query, args := listOutboxSQL(filter, afterSeq)
	rows, err := scanOutboxRows(s.reads.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, s.fail(ctx, "list outbox", err)
	}
	var out []turnframe.OutboxRecord
	for _, r := range rows {
		out = append(out, r.rec)
	}
	return out, nil
}

// listOutboxSQL returns ListOutbox's statement for filter, and its
// arguments; afterSeq is the seq of filter.After's row, read only when
// filter.After is set.
//
// A listing of the uncertain rows — Run's release, every PollInterval, and
// every Recover — reads its status's partial index (outbox_unknown,
// outbox_intervention: migration 00007), never the finished rows. So the
// status is written into the text as a literal, not bound: SQLite uses a
// partial index for a statement whose WHERE clause implies the index's
// condition, and proves that from the text; only a build with STAT4 (the
// driver's has it today) also looks at a bound value, by preparing the
// statement again once it is bound. The literal depends on no build. (A
// status's name is one of a closed set of snake_case words, checked by
// filter.Validate, so the literal needs no escaping.) And the
// statement names the index (INDEXED BY): with an account, the planner,
// which has no statistics, would rather read every row of the account
// through outbox_key, finished ones included; INDEXED BY also makes the
// statement fail to prepare, rather than read the table, should the index
// ever be missing.
func listOutboxSQL(filter turnframe.OutboxFilter, afterSeq int64) (string, []any) {
	query, args := `SELECT `+outboxCols+` FROM outbox`, []any{}
	if index := statusIndex(filter.Status); index != "" {
		query += ` INDEXED BY ` + index
	}
	query += ` WHERE 1`
	if !filter.After.IsZero() {
		query += ` AND seq > ?`
		args = append(args, afterSeq)
	}
	if filter.Status != 0 {
		query += ` AND status = '` + filter.Status.String() + `'`
	}
	if filter.Account != "" {
		query += ` AND account = ?`
		args = append(args, string(filter.Account))
	}
	query += ` ORDER BY seq LIMIT ?`
	args = append(args, filter.Limit)
	return query, args
}

// statusIndex returns the partial index holding exactly the rows of status
// st, in seq order (migration 00007), or "" for a status without one.
func statusIndex(st turnframe.OutboxStatus) string {
	switch st {
	case turnframe.OutboxOutcomeUnknown:
		return "outbox_unknown"
	case turnframe.OutboxNeedsIntervention:
		return "outbox_intervention"
	}
	return ""
}
