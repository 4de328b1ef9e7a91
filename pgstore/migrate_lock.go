package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3/lock"
)

// advisoryLocker is the session lock Migrate holds while goose migrates:
// pg_advisory_lock on migrateLockID, a wait in the server that ends the
// moment the holder lets go. goose's own Postgres locker polls
// pg_try_advisory_lock every 5 s instead, so processes that started at
// once waited 5 s, 10 s, … for a lock held a few milliseconds.
//
// The connection's lock_timeout and statement_timeout bound each wait
// (Open's connections: DefaultLockTimeout); a wait either one ends is begun
// again, so a migration that runs longer than them in another process (an
// index on a large table) is waited for, not refused. ctx bounds the whole
// wait.
type advisoryLocker struct{ id int64 }

var _ lock.SessionLocker = advisoryLocker{}

// SessionLock blocks until conn's session holds the lock, or ctx ends. A
// wait that fails leaves the session without the lock: the server may
// grant it just before a cancel or a timeout ends the statement, and a
// session that kept it would hold it twice after the next wait, or go
// back to the pool holding it, so that every other process that must
// migrate waited for as long as the connection lived.
func (l advisoryLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	for {
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, l.id)
		if err == nil {
			return nil
		}
		if uerr := l.dropIfHeld(ctx, conn); uerr != nil {
			discard(conn) // it may hold the lock: end the session rather than pool it
			return fmt.Errorf("take the migration lock: %w (the session was closed: letting go of the lock failed: %v)", err, uerr)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == codeLockNotAvailable || pe.Code == codeQueryCanceled) && ctx.Err() == nil {
			continue // lock_timeout or statement_timeout ended this wait; the holder is still migrating
		}
		return fmt.Errorf("take the migration lock: %w", err)
	}
}

// dropIfHeld releases the lock if conn's session holds it, past ctx's end
// (bounded on its own): only a lock granted under a wait that then failed
// is held here.
func (l advisoryLocker) dropIfHeld(ctx context.Context, conn *sql.Conn) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := conn.ExecContext(dctx, `SELECT pg_advisory_unlock($1) FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
		AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1`, l.id)
	return err
}

// SessionUnlock releases the lock SessionLock took on conn's session.
func (l advisoryLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock($1)`, l.id).Scan(&released); err != nil {
		return fmt.Errorf("release the migration lock: %w", err)
	}
	if !released {
		return fmt.Errorf("release the migration lock: the session did not hold it")
	}
	return nil
}

// discard closes conn's session on the server, so that every session lock
// it holds ends with it, and tells database/sql not to reuse the
// connection: a pool (the application's, New's) never gets it back.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(interface{ Conn() *pgx.Conn }); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Conn().Close(ctx)
		}
		return driver.ErrBadConn
	})
}
