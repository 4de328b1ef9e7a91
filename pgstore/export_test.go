package pgstore

import (
	"context"
	"database/sql"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// ClaimSQL is claimSQL, for the plan test.
const ClaimSQL = claimSQL

// UnfinishedSQL is unfinishedSQL, for the plan test.
const UnfinishedSQL = unfinishedSQL

// ListOutboxSQL is listOutboxSQL, ListOutbox's statement for a filter, for
// the plan test.
var ListOutboxSQL = listOutboxSQL

// CheckServerVersion is checkServerVersion, for the version test: no
// server older than 13 runs here.
var CheckServerVersion = checkServerVersion

// Translate is translate, for the error tests.
var Translate = translate

// RunInTx runs f in the store's write transaction loop (inTx), telling f
// which try it is (0 first) and marking the App as run when app is set,
// for the retry tests.
func RunInTx(s *Store, ctx context.Context, app bool, f func(try int) error) error {
	try := 0
	return s.inTx(ctx, "test", func(tx *wtx) error {
		tx.appRan = app
		defer func() { try++ }()
		return f(try)
	})
}

// MigrateTo applies the migrations up to version and no further, as an
// earlier build of pgstore would have left the schema, for the upgrade
// tests.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(VersionTable))
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// MigrateLockID is migrateLockID, for the tests that hold the lock.
const MigrateLockID = migrateLockID

// TakeMigrationLock takes the migration lock on conn's session as Migrate
// does (advisoryLocker), for the test of its waits.
func TakeMigrationLock(ctx context.Context, conn *sql.Conn) error {
	return advisoryLocker{id: migrateLockID}.SessionLock(ctx, conn)
}

// DropMigrationLockIfHeld is advisoryLocker.dropIfHeld, for its test.
func DropMigrationLockIfHeld(ctx context.Context, conn *sql.Conn) error {
	return advisoryLocker{id: migrateLockID}.dropIfHeld(ctx, conn)
}

// DiscardSession is discard, for its test.
var DiscardSession = discard

// Qualify is what the store's statements become on their way to a store in
// schema (tables.go), for the test that every statement names its tables
// there.
func Qualify(schema, sql string) string { return qualifier(schema)(sql) }

// SetCommitWait bounds how long s waits for a transaction whose COMMIT went
// unanswered to end (defaultCommitWait), for the test that it gives up.
func SetCommitWait(s *Store, d time.Duration) { s.commitWait = d }
