package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// A wait for the migration lock that fails may fail after the server
// granted the lock (a cancel or a timeout arriving just after the grant).
// The locker then lets go of it, so that the session neither holds it
// twice after its next wait nor goes back to the pool holding it, while
// every other process that must migrate waits. The race is rare; what is
// tested here is the release itself: that it finds the lock the session
// holds (the key's two halves, as pg_locks shows them) and lets it go,
// and is harmless when the session does not hold it.
func TestALockGrantedToAWaitThatFailedIsLetGo(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Schema(t))
	is.NoErr(err)
	defer pool.Close()
	sdb := stdlib.OpenDBFromPool(pool)
	defer sdb.Close()
	conn, err := sdb.Conn(ctx)
	is.NoErr(err)
	defer conn.Close()
	held := func() bool {
		var n int
		is.NoErr(conn.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted`).Scan(&n))
		return n > 0
	}
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, pgstore.MigrateLockID)
	is.NoErr(err)
	is.True(held()) // granted, as to a wait whose statement then failed
	is.NoErr(pgstore.DropMigrationLockIfHeld(ctx, conn))
	is.True(!held()) // let go
	is.NoErr(pgstore.DropMigrationLockIfHeld(ctx, conn))
	is.True(!held()) // and nothing happens when it is not held
}

// When letting go of the lock fails too, the session may still hold it:
// it is closed, never handed back to the pool (an application's, with New
// or Migrate), where it would hold the lock as long as it lived.
func TestASessionThatMayHoldTheLockIsClosedNotPooled(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, db)
	is.NoErr(err)
	defer pool.Close()
	sdb := stdlib.OpenDBFromPool(pool)
	defer sdb.Close()
	conn, err := sdb.Conn(ctx)
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, pgstore.MigrateLockID)
	is.NoErr(err)
	pgstore.DiscardSession(conn)
	conn.Close()
	watch, err := pgx.Connect(ctx, db)
	is.NoErr(err)
	defer watch.Close(ctx)
	var held int
	is.NoErr(watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1`, pgstore.MigrateLockID).Scan(&held))
	is.Equal(held, 0) // the session ended, and its lock with it
}
