package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// Backend is what the harness needs of a store beside turnframe.Store: a
// database for one run, stores on it for each use, the application's own
// table written in the commit's transaction, the reads only SQL can make,
// and a way to hold writes up (fault b). The same Backend value must be
// given to Main, in the child processes, and to the tests, in the parent.
type Backend interface {
	// Name names the store in the figures and in failure messages.
	Name() string
	// Create makes the migrated, empty database of one run (so that two
	// children starting at once never meet a half-migrated one), removed
	// when t ends, and returns the address the children open it by.
	Create(t testing.TB) string
	// Open opens a store on the database at db, configured for use.
	Open(ctx context.Context, db string, use Use) (turnframe.Store, error)
	// CreateAppTable creates the application's table app_commits (columns
	// id, an increasing integer key; account, key, attempt and worker,
	// text) in s's database unless it exists. Several children call it at
	// once.
	CreateAppTable(ctx context.Context, s turnframe.Store) error
	// InsertAppRow inserts r into app_commits on tx, the transaction of a
	// Write (Outcome.With).
	InsertAppRow(ctx context.Context, tx turnframe.Tx, r AppRow) error
	// Query runs query, a read without parameters in SQL both stores
	// understand, on s's database, and calls each once per row with the
	// row's Scan.
	Query(ctx context.Context, s turnframe.Store, query string, each func(scan func(dest ...any) error) error) error
	// Integrity runs the database's own consistency check on s's database
	// and returns its verdict, "ok" when it found nothing wrong; NoIntegrityCheck
	// when the database has none the harness can run.
	Integrity(ctx context.Context, s turnframe.Store) (string, error)
	// Locker returns what holds the database's writes up for fault (b), on
	// a connection of its own to db; nil, nil when the backend has none
	// (fault (b) then never fires).
	Locker(ctx context.Context, db string) (Locker, error)
}

// NoIntegrityCheck is Backend.Integrity's verdict for a database without a
// consistency check of its own.
const NoIntegrityCheck = "not available"

// Use says what a child opens a store for.
type Use int

const (
	// UseRuntime is the store of the Runtime, the Recovery and the reads:
	// it waits out every fault (a held lock) rather than fail busy.
	UseRuntime Use = iota
	// UseDispatcher is the Dispatcher's and the expirer's: it gives up on
	// a lock held longer than dispatchBusyTimeout (80 ms) with
	// turnframe.ErrBusy, so fault (b) makes its settlements busy.
	UseDispatcher
	// UseActor is the concurrent actor's of fault (a): as UseRuntime, on
	// connections of its own.
	UseActor
	// UseFill fills a database in the parent, where durability matters
	// less than speed.
	UseFill
	// UseAudit reads a database after every child is gone.
	UseAudit
)

// DispatchBusyTimeout is how long UseDispatcher's store waits for a lock
// before it gives up with turnframe.ErrBusy.
const DispatchBusyTimeout = dispatchBusyTimeout

// StoreBusyTimeout is how long UseRuntime's and UseActor's stores wait for
// a lock at least.
const StoreBusyTimeout = storeBusyTimeout

// AppRow is one row of the application's table: a commit a handler made.
type AppRow struct {
	Account, Key, Attempt, Worker string
}

// Locker holds the database's writes up, as another writer would.
type Locker interface {
	// Hold takes the lock, so that a UseDispatcher store's write is
	// refused busy, and returns the function that lets it go; an error
	// when it could not take it (another writer had it).
	Hold(ctx context.Context) (release func(), err error)
	Close() error
}

// openWhileBusy opens a store, trying again while another process holds
// the database (for at most storeBusyTimeout).
func openWhileBusy(ctx context.Context, b Backend, db string, use Use) (turnframe.Store, error) {
	deadline := time.Now().Add(storeBusyTimeout)
	for {
		s, err := b.Open(ctx, db, use)
		if err == nil || !errors.Is(err, turnframe.ErrBusy) || time.Now().After(deadline) {
			return s, err
		}
		tally("busy_open", 1)
	}
}

// Rows is what EachRow reads: a driver's result set (database/sql's
// *sql.Rows and pgx's Rows both are).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// EachRow calls each once per row of rows with the row's Scan, stopping at
// the first error each returns, and returns that error or the result set's
// own: the loop of every Backend.Query. The caller closes rows.
func EachRow(rows Rows, each func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
