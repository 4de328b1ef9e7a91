package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3/lock"
)

// advisoryLocker is the session lock Migrate holds while goose migrates:
// pg_advisory_lock on migrateLockID, a wait in the server that ends the
// moment the holder lets go. goose's own Postgres locker polls
// pg_try_advisory_lock every 5 s instead, so processes that started at
// once waited 5 s, 10 s, … for a lock held a few milliseconds.
//
// The connection's lock_timeout bounds each wait (Open's connections:
// DefaultLockTimeout); a wait that times out is begun again, so a
// migration that runs longer than lock_timeout in another process (an
// index on a large table) is waited for, not refused. ctx bounds the
// whole wait.
type advisoryLocker struct{ id int64 }

var _ lock.SessionLocker = advisoryLocker{}

// SessionLock blocks until conn's session holds the lock, or ctx ends.
func (l advisoryLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	for {
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, l.id)
		var pe *pgconn.PgError
		if err != nil && errors.As(err, &pe) && pe.Code == codeLockNotAvailable && ctx.Err() == nil {
			continue // lock_timeout ended this wait; the holder is still migrating
		}
		if err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		return nil
	}
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
