package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The raw contender is what SQLite itself can do with hand-written SQL and
// prepared statements on a table shaped like turnframe's outbox: the
// ceilings turnframe is measured against. It keeps every fence turnframe
// keeps (a settle matches the row only while it is still Dispatching under
// the same worker and attempt), so the ceiling does no less work than the
// library must.
const rawSchema = `
CREATE TABLE IF NOT EXISTS outbox (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    payload     BLOB,
    status      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    due_at      INTEGER NOT NULL,
    claimed_by  TEXT    NOT NULL DEFAULT '',
    claimed_at  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (due_at, seq) WHERE status = 'pending';
`

const (
	rawClaimSQL = `UPDATE outbox SET status = 'dispatching', attempts = attempts + 1, claimed_by = ?1, claimed_at = ?2, updated_at = ?2
WHERE seq IN (SELECT seq FROM outbox WHERE status = 'pending' AND due_at <= ?2 ORDER BY due_at, seq LIMIT ?3)
RETURNING seq, id, payload, attempts`
	rawSettleSQL = `UPDATE outbox SET status = 'completed', updated_at = ?1, finished_at = ?1
WHERE seq = ?2 AND status = 'dispatching' AND claimed_by = ?3 AND attempts = ?4`
)

// Raw is one raw SQLite file: the outbox table and the application table,
// one connection, BEGIN IMMEDIATE.
type Raw struct {
	DB     *sql.DB
	insApp *sql.Stmt
	insOut *sql.Stmt
	claim  *sql.Stmt
	settle *sql.Stmt
	seq    int64
}

// OpenRaw creates the raw schema in a fresh file.
func OpenRaw(ctx context.Context, path string, s Sync) (*Raw, error) {
	db, err := OpenDB(ctx, path, s, true, 1)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, rawSchema+";"+appSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("raw schema: %w", err)
	}
	r := &Raw{DB: db}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&r.insApp, `INSERT INTO app_rows (payload) VALUES (?)`},
		{&r.insOut, `INSERT INTO outbox (id, payload, status, due_at, updated_at) VALUES (?1, ?2, 'pending', ?3, ?3)`},
		{&r.claim, rawClaimSQL},
		{&r.settle, rawSettleSQL},
	} {
		if *p.dst, err = db.PrepareContext(ctx, p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	return r, nil
}

// Close closes the file.
func (r *Raw) Close() error { return r.DB.Close() }

// Enqueue is the raw enqueue-in-tx: one transaction, two INSERTs (the
// application row and the outbox row).
func (r *Raw) Enqueue(ctx context.Context, payload []byte) error {
	r.seq++
	id := fmt.Sprintf("%026d", r.seq)
	now := time.Now().UnixMicro()
	return inTx(ctx, r.DB, func(tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, r.insApp).ExecContext(ctx, payload); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, r.insOut).ExecContext(ctx, id, payload, now)
		return err
	})
}

// Seed inserts n due rows in one statement per 100k rows (untimed set-up).
func (r *Raw) Seed(ctx context.Context, n int) error {
	due := time.Now().Add(-time.Minute).UnixMicro()
	for done := 0; done < n; {
		k := min(100_000, n-done)
		_, err := r.DB.ExecContext(ctx, `
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1)
INSERT INTO outbox (id, payload, status, due_at, updated_at)
SELECT printf('%026d', ?2 + x), randomblob(?3), 'pending', ?4, ?4 FROM c`, k, r.seq, PayloadSize, due)
		if err != nil {
			return fmt.Errorf("raw seed: %w", err)
		}
		r.seq += int64(k)
		done += k
	}
	return nil
}

type rawClaim struct {
	seq      int64
	id       string
	payload  []byte
	attempts int
}

func (r *Raw) claimBatch(ctx context.Context, worker string, limit int) ([]rawClaim, error) {
	var out []rawClaim
	err := inTx(ctx, r.DB, func(tx *sql.Tx) error {
		rows, err := tx.StmtContext(ctx, r.claim).QueryContext(ctx, worker, time.Now().UnixMicro(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c rawClaim
			if err := rows.Scan(&c.seq, &c.id, &c.payload, &c.attempts); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

func (r *Raw) settleIn(ctx context.Context, tx *sql.Tx, worker string, c rawClaim) error {
	res, err := tx.StmtContext(ctx, r.settle).ExecContext(ctx, time.Now().UnixMicro(), c.seq, worker, c.attempts)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("raw settle %d: claim lost", c.seq)
	}
	return nil
}

// Drain claims batches of 16 and settles them Completed until none is due
// or at least upTo rows are settled (upTo <= 0: no limit): each row in its
// own transaction when perRow, else all 16 in one. It returns the number of
// rows settled.
func (r *Raw) Drain(ctx context.Context, perRow bool, upTo int) (int, error) {
	const worker = "raw"
	total := 0
	for upTo <= 0 || total < upTo {
		batch, err := r.claimBatch(ctx, worker, 16)
		if err != nil {
			return total, fmt.Errorf("raw claim: %w", err)
		}
		if len(batch) == 0 {
			return total, nil
		}
		if perRow {
			for _, c := range batch {
				if err := inTx(ctx, r.DB, func(tx *sql.Tx) error { return r.settleIn(ctx, tx, worker, c) }); err != nil {
					return total, err
				}
			}
		} else {
			err := inTx(ctx, r.DB, func(tx *sql.Tx) error {
				for _, c := range batch {
					if err := r.settleIn(ctx, tx, worker, c); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return total, err
			}
		}
		total += len(batch)
	}
	return total, nil
}
