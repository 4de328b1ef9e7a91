package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Processes that start together all open the store. The migration lock is
// for those that migrate: one that finds the schema current takes none,
// and one that must wait for it waits in the server, for as long as the
// migrating process holds it, however short its own lock_timeout. goose's
// own locker tried the lock every 5 s: twenty processes opening one
// current schema at once waited up to 10 s, and a crash-test expirer that
// lost the race six times in a row never ran.
func TestOpenAndTheMigrationLock(t *testing.T) {
	t.Run("ACurrentSchemaOpensWhileAnotherSessionHoldsTheLock", func(t *testing.T) {
		is := is.New(t)
		db := pgtest.Schema(t)
		mustOpenURL(t, db) // migrated: current from here on
		holdMigrationLock(t, db)
		// A bound for a hang, not a measure: goose's locker gave up after 5 min.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := pgstore.Open(ctx, db)
		is.NoErr(err) // opened without the lock
		is.NoErr(s.Close())
	})
	t.Run("AnOpenerWaitsForTheLockAndMigratesOnceItIsLetGo", func(t *testing.T) {
		is := is.New(t)
		db := pgtest.Schema(t) // empty: the opener must migrate
		holder := holdMigrationLock(t, db)
		app := "opener_" + strings.ToLower(rand.Text())
		opener := pgtest.WithParams(t, db, url.Values{"application_name": {app}})
		done := make(chan error, 1)
		go func() {
			s, err := pgstore.Open(context.Background(), opener)
			if err == nil {
				err = s.Close()
			}
			done <- err
		}()
		waitForLockWait(t, db, app, done)
		releaseMigrationLock(t, holder)
		is.NoErr(<-done) // migrated once the lock was let go
		s := mustOpenURL(t, db, pgstore.WithExisting())
		is.NoErr(s.Close()) // at this build's version
	})
	// A URL may set either timeout (statement_timeout is a common safety
	// setting); each ends a wait in pg_advisory_lock, which goose's
	// polling locker never met.
	for _, setting := range []string{"lock_timeout", "statement_timeout"} {
		t.Run("AWaitForTheLockOutlastsTheSessions_"+setting, func(t *testing.T) {
			is := is.New(t)
			db := pgtest.Schema(t)
			holder := holdMigrationLock(t, db)
			app := "opener_" + strings.ToLower(rand.Text())
			// Only the lock is taken here, not the migration that follows it,
			// whose own statements a timeout this short could cut.
			pool, err := pgxpool.New(context.Background(), pgtest.WithParams(t, db, url.Values{setting: {"20"}, "application_name": {app}}))
			is.NoErr(err)
			defer pool.Close()
			sdb := stdlib.OpenDBFromPool(pool)
			defer sdb.Close()
			conn, err := sdb.Conn(context.Background())
			is.NoErr(err)
			defer conn.Close()
			done := make(chan error, 1)
			go func() { done <- pgstore.TakeMigrationLock(context.Background(), conn) }()
			waitForSecondLockWait(t, db, app, done) // its first wait ended at the timeout, and it waits again
			releaseMigrationLock(t, holder)
			is.NoErr(<-done) // taken once the holder let go, not refused at the first timeout
		})
	}
	t.Run("AnOpenerWaitingForTheLockEndsWithItsContext", func(t *testing.T) {
		is := is.New(t)
		db := pgtest.Schema(t)
		holdMigrationLock(t, db)
		app := "opener_" + strings.ToLower(rand.Text())
		opener := pgtest.WithParams(t, db, url.Values{"application_name": {app}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			s, err := pgstore.Open(ctx, opener)
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		waitForLockWait(t, db, app, done)
		cancel()
		err := <-done
		is.True(errors.Is(err, context.Canceled)) // the caller's context, not a lock error
	})
}

// holdMigrationLock takes the migration lock on a session of its own,
// released when t ends, and returns the session.
func holdMigrationLock(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatalf("hold the migration lock: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, pgstore.MigrateLockID); err != nil {
		t.Fatalf("hold the migration lock: %v", err)
	}
	return conn
}

func releaseMigrationLock(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, pgstore.MigrateLockID); err != nil {
		t.Fatalf("release the migration lock: %v", err)
	}
}

// lockWaitStart returns when the session named app began the lock wait it
// is in, if it is waiting for an advisory lock.
func lockWaitStart(t *testing.T, ctx context.Context, watch *pgx.Conn, app string) (time.Time, bool) {
	t.Helper()
	var began *time.Time
	err := watch.QueryRow(ctx, `SELECT query_start FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, app).Scan(&began)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && began == nil) {
		return time.Time{}, false
	}
	if err != nil {
		t.Fatalf("read the lock wait: %v", err)
	}
	return *began, true
}

// waitForLockWait returns once the session named app waits for the
// migration lock; it fails the test if done has a value first, or after
// 30 s (a bound for a hang). It polls from a session of its own, outside
// any transaction, and never sleeps.
func waitForLockWait(t *testing.T, db, app string, done <-chan error) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer watch.Close(context.Background())
	for {
		select {
		case err := <-done:
			t.Fatalf("the opener returned before it waited for the lock: %v", err)
		default:
		}
		if began, ok := lockWaitStart(t, ctx, watch, app); ok {
			return began
		}
	}
}

// waitForSecondLockWait returns once the session named app waits for the
// migration lock in a statement other than its first wait's.
func waitForSecondLockWait(t *testing.T, db, app string, done <-chan error) {
	t.Helper()
	first := waitForLockWait(t, db, app, done)
	for {
		if began := waitForLockWait(t, db, app, done); began.After(first) {
			return
		}
	}
}
