// Package pgstore is a turnframe.Store over PostgreSQL, through
// github.com/jackc/pgx/v5 and its pool (pgxpool), for an application that
// runs on several machines against one database. It needs PostgreSQL 13
// or later (Open refuses an older server).
//
// It keeps the contract of turnframe.Store exactly as sqlitestore does, and
// is held to it by the same conformance suite (storetest). Every write is one
// transaction at PostgreSQL's default isolation, READ COMMITTED, and every
// rule that reads before it writes locks what it reads first, so that
// concurrent writers on any number of processes act as if one ran after the
// other:
//
//   - a Write locks its turn's row (SELECT ... FOR UPDATE; a Begin inserts
//     it), so the Writes of one turn — its phase, its pending count, the
//     entries it admits and settles — run one at a time;
//   - a journal entry is locked before NextEntry or Readmit reads it;
//     a key admitted by two turns at once, or a message id delivered twice
//     at once, is arbitrated by the INSERT itself (ON CONFLICT DO NOTHING,
//     then the winner is read and locked);
//   - the writers of one case (events, Expect) and of one order key
//     (enqueue, and every move that starts or stops a row holding its key)
//     take a transaction-scoped advisory lock on it, in a fixed order;
//   - claims lock the rows they take (FOR UPDATE SKIP LOCKED), and every
//     other move of an outbox row locks it first.
//
// This was chosen over SERIALIZABLE with retries because claims are the hot
// path: under SERIALIZABLE every claimer reads the range of due rows every
// other claimer writes, and most claims would fail and be retried. A
// deadlock between two writers (which PostgreSQL detects and breaks) or a
// serialization failure is retried inside the call, a few times; what still
// fails is turnframe.ErrBusy, nothing written. So is a wait for a lock past
// lock_timeout, which Open sets to DefaultLockTimeout unless its URL sets
// one: a session that keeps its transaction open holds up a call of the
// store's no longer than that.
//
// Each operation validates its input first (ErrInvalid, nothing written),
// then calls the transition rules (packages storekit and turnframe) on the rows as stored
// and writes back what they return. Driver errors are translated at the
// boundary: a unique violation is turnframe.ErrConflict, a serialization
// failure or deadlock that outlasted the retries is turnframe.ErrBusy, a
// string PostgreSQL cannot store (a NUL byte) is turnframe.ErrInvalid, a
// cancelled context stays a context error, and a call that meets a closed
// store or pool is turnframe.ErrClosed.
//
// Times are kept as bigint Unix microseconds, as in SQLite (the migrations
// say why), on the database's clock by default: every call reads the
// database's clock first (before its transaction, or, for a Write that is
// not a Begin, in the statement that locks its turn) and moves the times
// it is given into the database's frame, and the times it returns back into the caller's
// (DatabaseClock, frame.go), so leases stay exclusive and end on time
// whatever the hosts' clocks say. CallerClock takes the callers' times as
// they are, as sqlitestore does; the conformance suite runs in it.
//
// Across processes: a write that enqueues outbox rows notifies
// (pg_notify) in its transaction, and ListenEnqueued, which
// turnframe.Dispatcher.Run uses, hears the commits of every process on the
// schema. BeginTx and ApplyTx commit the application's own tables with a
// Write, in the application's transaction.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/wake"
)

var _ turnframe.Store = (*Store)(nil)

// Store is a turnframe.Store over a PostgreSQL database. It is safe for
// concurrent use, and several Stores, in one process or several, may use the
// same database: claims stay exclusive and every rule holds across all of
// them. Get one from Open or New; the zero value is not usable.
type Store struct {
	pool     *pgxpool.Pool
	ownPool  bool // Open made the pool, so Close closes it
	ids      *turnframe.IDGenerator
	retries  int
	clock    Clock               // WithClock: the frame of every call (frame.go)
	host     func() time.Time    // WithHostClock
	channel  string              // the pg_notify channel of enqueues (listen.go)
	schema   string              // current_schema() of the pool's connections: where the store's tables are
	qualify  func(string) string // names the tables in schema in a statement (tables.go)
	db       inSchema            // the pool, for reads (readPool): its statements qualified
	database string              // current_database() of the pool's connections: where schema is
	// lockTimeout is the pool's connections' lock_timeout when New ran,
	// which each write transaction keeps whatever its session was left
	// with (sessionGuardSQL).
	lockTimeout string

	commitWait time.Duration // how long commitOutcome waits for a transaction to end; 0: defaultCommitWait

	mu      sync.Mutex         // guards closed, and calls.Add against Close's calls.Wait
	closed  bool               // set by Close: every call from then on is ErrClosed
	calls   sync.WaitGroup     // the calls in progress, which Close waits for
	closing context.Context    // ends when Close is called: a listen's connect waits no longer
	endAll  context.CancelFunc // ends closing

	enqueued wake.Broadcast // signalled by each Apply that enqueued rows (notify.go)
}

// Pool returns the pool the store runs on, for operator tools and tests that
// query the database directly (the schema is in the migrations). Do not
// close it: Close does, for a store from Open; a store from New leaves it to
// its owner.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close marks the store closed and waits for the calls in progress to
// return. A store from Open then closes its pool (which waits for the
// connections in use to come back); a store from New leaves the pool open,
// for its owner. Every call after Close, Close included, returns an error
// wrapping turnframe.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("pgstore: close: %w", turnframe.ErrClosed)
	}
	s.closed = true
	s.mu.Unlock()
	s.endAll()
	s.calls.Wait()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// enter marks a call in progress, so Close waits for it, or returns
// ErrClosed. The caller calls the returned function when it is done.
func (s *Store) enter(op string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("pgstore: %s: %w", op, turnframe.ErrClosed)
	}
	s.calls.Add(1)
	return s.calls.Done, nil
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// fail wraps err for the operation op at the API boundary (translate). An
// error met while the store is closing is also ErrClosed.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	err = translate(ctx, err)
	if s.isClosed() && !errors.Is(err, turnframe.ErrClosed) {
		return fmt.Errorf("pgstore: %s: %w: %w", op, turnframe.ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}
