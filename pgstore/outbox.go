package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
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
	f, err := s.frameAt(ctx, s.pool, "resolve", res.Now)
	if err != nil {
		return err
	}
	res.Now = f.in(res.Now)
	return s.dbResolve(ctx, res)
}

// dbResolve is Resolve on times in the store's frame (frame.go).
func (s *Store) dbResolve(ctx context.Context, res turnframe.Resolution) error {
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
	f, err := s.frame(ctx, "requeue")
	if err != nil {
		return err
	}
	return s.dbRequeue(ctx, id, attempts, f.in(at))
}

// dbRequeue is Requeue on times in the store's frame (frame.go).
func (s *Store) dbRequeue(ctx context.Context, id turnframe.OutboxID, attempts int, at time.Time) error {
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
	f, err := s.frameAt(ctx, s.pool, "release", now)
	if err != nil {
		return err
	}
	return s.dbReleaseClaim(ctx, id, attempts, f.in(now))
}

// dbReleaseClaim is ReleaseClaim on times in the store's frame (frame.go).
func (s *Store) dbReleaseClaim(ctx context.Context, id turnframe.OutboxID, attempts int, now time.Time) error {
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

// lockOutboxSQL reads a row by id and locks it.
const lockOutboxSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE id = $1 FOR UPDATE`

// moveOutbox locks row id, applies rule to it, stores the result and
// records the move as actor with note at now.
func moveOutbox(ctx context.Context, tx *wtx, id turnframe.OutboxID, actor turnframe.Actor, note string, now time.Time, rule func(turnframe.OutboxRecord) (turnframe.OutboxRecord, error)) error {
	row, err := scanOutbox(tx.QueryRow(ctx, lockOutboxSQL, id.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("outbox row %v: %w", id, turnframe.ErrNotFound)
	}
	if err != nil {
		return err
	}
	next, err := rule(row.rec)
	if err != nil {
		return err
	}
	if err := lockAll(ctx, tx, orderLocks([2]turnframe.OutboxRecord{row.rec, next})); err != nil {
		return err
	}
	return storeMove(ctx, tx, row, next, actor, note, now)
}

// storeMove stores next, what a rule made of row (locked, as stored), with
// the held marks of its order key (whose lock the caller holds when the
// move changes them), and records the move as actor with note at now.
func storeMove(ctx context.Context, tx *wtx, row outboxRow, next turnframe.OutboxRecord, actor turnframe.Actor, note string, now time.Time) error {
	tx.queue(nil, updateOutboxSQL, updateOutboxArgs(row.seq, next)...)
	tx.record(storekit.RowHistory(row.rec, next, actor, note, now))
	return keepOrder(ctx, tx, row.seq, row.rec, next)
}

// updateOutboxSQL writes every column a transition may change.
const updateOutboxSQL = `UPDATE outbox SET status = $1, attempts = $2, due_at = $3, claimed_by = $4, claimed_at = $5,
	last_code = $6, remote_ref = $7, updated_at = $8, finished_at = $9, lease_until = $10, attempt_base = $11
	WHERE seq = $12`

func updateOutboxArgs(seq int64, r turnframe.OutboxRecord) []any {
	return []any{r.Status.String(), r.Attempts, micros(r.DueAt), r.ClaimedBy, micros(r.ClaimedAt),
		r.LastCode, r.RemoteRef, micros(r.UpdatedAt), micros(r.FinishedAt), micros(r.LeaseUntil), r.AttemptBase, seq}
}

// expireSQL reads and locks the claims whose lease ended at $1 through the
// partial index of Dispatching rows by lease end (outbox_leases), so its
// cost follows the ended leases, not the table. It restates the test of
// turnframe.LeaseEnded, which ExpireClaims applies again to every row. A
// row another transaction holds (a settlement, an extension, a session
// that keeps it locked) is skipped, not waited for: the transaction that
// holds it settles or extends it, or a later call expires it. Waiting
// would let one row locked for ever stop every release, of every tenant.
const expireSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE status = 'dispatching' AND lease_until <= $1
	ORDER BY seq FOR UPDATE SKIP LOCKED`

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
// row another transaction holds locked is left for a later call. A crash
// before the commit expires nothing.
func (s *Store) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	f, err := s.frameAt(ctx, s.pool, "expire claims", now)
	if err != nil {
		return nil, err
	}
	return s.dbExpireClaims(ctx, f.in(now))
}

// dbExpireClaims is ExpireClaims on times in the store's frame (frame.go).
func (s *Store) dbExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return nil, err
	}
	now = stamp(now)
	var ids []turnframe.OutboxID
	err := s.inTx(ctx, "expire claims", func(tx *wtx) error {
		ids = nil
		rows, err := scanOutboxRows(tx.Query(ctx, expireSQL, micros(now)))
		if err != nil {
			return err
		}
		for _, row := range rows {
			if !turnframe.LeaseEnded(row.rec, now) {
				return fmt.Errorf("row %v read as an ended lease, but turnframe.LeaseEnded says it is %v until %v",
					row.rec.ID, row.rec.Status, row.rec.LeaseUntil)
			}
			next, err := storekit.ExpireRow(row.rec, now)
			if err != nil {
				return err
			}
			// Expiry keeps the row holding its key: no mark moves, no
			// order lock is needed.
			if err := storeMove(ctx, tx, row, next, turnframe.ActorRecovery, "", now); err != nil {
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

// The statements of Prune, one batch at a time: the batch's finished rows
// are locked first, so a row requeued meanwhile is either requeued before
// (and no longer finished) or after (and gone), and its history goes
// exactly when it does. lockPrunableSQL reads at most $2
// (storekit.PruneBatch) rows, oldest first through outbox_finished, and of
// each only what storekit.Prunable needs and what names it and its
// history: never its payload.
const (
	lockPrunableSQL = `SELECT seq, id, account, status, finished_at FROM outbox
		WHERE status IN ('completed', 'failed') AND finished_at < $1 ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`
	pruneHistorySQL = `DELETE FROM history AS h USING unnest($1::text[], $2::text[]) AS d(account, ref)
		WHERE h.kind = 'outbox' AND h.account = d.account AND h.ref = d.ref`
	pruneSQL = `DELETE FROM outbox WHERE seq = ANY($1)`
)

// Prune deletes Completed and Failed rows finished before finishedBefore,
// with their history, and returns how many. It reads only finished rows and
// never touches the journal or its history, nor a turn's: a key keeps
// deduplicating after its rows are gone. ErrInvalid for a zero
// finishedBefore.
//
// It deletes in batches of storekit.PruneBatch rows, oldest first, each
// with its rows' history in a transaction of its own, and reads no
// payload: a large prune holds its row locks one batch at a time, and a
// row another transaction holds is left for a later prune rather than
// waited for. Each batch is whole on its own: a crash between batches
// leaves a consistent database with fewer rows pruned, and an error
// returns, with it, the count of the rows the batches before it pruned;
// the rows of the batch that failed are kept, with their history.
func (s *Store) Prune(ctx context.Context, finishedBefore time.Time) (int, error) {
	f, err := s.frame(ctx, "prune")
	if err != nil {
		return 0, err
	}
	return s.dbPrune(ctx, f.in(finishedBefore))
}

// dbPrune is Prune on times in the store's frame (frame.go).
func (s *Store) dbPrune(ctx context.Context, finishedBefore time.Time) (int, error) {
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
		var (
			seqs          []int64
			accounts, ids []string
		)
		rows, err := tx.Query(ctx, lockPrunableSQL, micros(finishedBefore), storekit.PruneBatch)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			seq, r, err := scanPruned(rows)
			if err != nil {
				return err
			}
			// The statement restates storekit.Prunable; a row it picked
			// that the rule keeps rolls the batch back.
			if !storekit.Prunable(r, finishedBefore) {
				return fmt.Errorf("row %v picked, but storekit.Prunable keeps it", r.ID)
			}
			seqs = append(seqs, seq)
			accounts, ids = append(accounts, string(r.Account)), append(ids, r.ID.String())
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		n = len(seqs) // f may run again: n is this run's
		if n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, pruneHistorySQL, accounts, ids); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, pruneSQL, seqs)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// scanPruned reads a row lockPrunableSQL returns: its seq and, of the
// record, only its id, account, status and finish time.
func scanPruned(sc pgx.Row) (int64, turnframe.OutboxRecord, error) {
	var (
		seq, fin            int64
		r                   turnframe.OutboxRecord
		id, account, status string
	)
	err := sc.Scan(&seq, &id, &account, &status, &fin)
	if err != nil {
		return 0, r, err
	}
	if r.ID, err = parseID("outbox id", id, turnframe.ParseOutboxID); err != nil {
		return 0, r, err
	}
	if r.Status, err = turnframe.ParseOutboxStatus(status); err != nil {
		return 0, r, fmt.Errorf("stored outbox status: %w", err)
	}
	r.Account, r.FinishedAt = turnframe.AccountID(account), fromMicros(fin)
	return seq, r, nil
}

const findOutboxSQL = `SELECT ` + outboxCols + ` FROM outbox WHERE id = $1`

// GetOutbox returns one row, whatever its account. ErrInvalid for a zero
// id; ErrNotFound if it does not exist (or was pruned).
func (s *Store) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	f, err := s.frame(ctx, "get outbox")
	if err != nil {
		return turnframe.OutboxRecord{}, err
	}
	r, err := s.dbGetOutbox(ctx, id)
	return f.recordOut(r), err
}

// dbGetOutbox is GetOutbox on times in the store's frame (frame.go).
func (s *Store) dbGetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	if err := turnframe.CheckID("id", id); err != nil {
		return turnframe.OutboxRecord{}, err
	}
	done, err := s.enter("get outbox")
	if err != nil {
		return turnframe.OutboxRecord{}, err
	}
	defer done()
	row, err := findOutbox(ctx, s.db, id)
	if err != nil {
		return turnframe.OutboxRecord{}, s.fail(ctx, "get outbox", err)
	}
	return row.rec, nil
}

func findOutbox(ctx context.Context, q querier, id turnframe.OutboxID) (outboxRow, error) {
	row, err := scanOutbox(q.QueryRow(ctx, findOutboxSQL, id.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return row, fmt.Errorf("outbox row %v: %w", id, turnframe.ErrNotFound)
	}
	return row, err
}

// ListOutbox returns at most filter.Limit rows matching filter, in enqueue
// order; with filter.After, only rows enqueued after that one (the last
// row of the page before). ErrInvalid for a bad filter; ErrNotFound for an
// After row that does not exist (pruned, or never enqueued) or, with
// filter.Account, belongs to another account: a cursor never reveals that
// another tenant's row exists.
func (s *Store) ListOutbox(ctx context.Context, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	f, err := s.frame(ctx, "list outbox")
	if err != nil {
		return nil, err
	}
	rs, err := s.dbListOutbox(ctx, filter)
	for i := range rs {
		rs[i] = f.recordOut(rs[i])
	}
	return rs, err
}

// dbListOutbox is ListOutbox on times in the store's frame (frame.go).
func (s *Store) dbListOutbox(ctx context.Context, filter turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
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
		after, err := findOutbox(ctx, s.db, filter.After)
		if err == nil && filter.Account != "" && after.rec.Account != filter.Account {
			err = fmt.Errorf("outbox row %v: %w", filter.After, turnframe.ErrNotFound)
		}
		if err != nil {
			return nil, s.fail(ctx, "list outbox", err)
		}
		afterSeq = after.seq
	}
	query, args := listOutboxSQL(filter, afterSeq)
	rows, err := scanOutboxRows(s.db.Query(ctx, query, args...))
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
// filter.After is set. The status is written into the text as a literal,
// not bound: pgx prepares the statement, and a generic plan of
// status = $1 cannot prove a partial index's condition, while
// outbox_unknown and outbox_intervention (migration 00007) are what keep
// the listing of the uncertain rows — Run's release, every PollInterval,
// and every Recover — off the finished ones. A status's name is one of a
// closed set of snake_case words (filter.Validate checked the status), so
// the literal needs no escaping.
func listOutboxSQL(filter turnframe.OutboxFilter, afterSeq int64) (string, []any) {
	query, args := `SELECT `+outboxCols+` FROM outbox WHERE true`, []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !filter.After.IsZero() {
		query += ` AND seq > ` + arg(afterSeq)
	}
	if filter.Status != 0 {
		query += ` AND status = '` + filter.Status.String() + `'`
	}
	if filter.Account != "" {
		query += ` AND account = ` + arg(string(filter.Account))
	}
	query += ` ORDER BY seq LIMIT ` + arg(filter.Limit)
	return query, args
}
