// Package sqlitestore is a turnframe.Store over one SQLite file, through the
// pure-Go driver modernc.org/sqlite (no cgo).
//
// A Store holds two pools on the file. The writer is one connection: every
// write is a BEGIN IMMEDIATE transaction on it, so writes in this process
// queue in Go, and a writer in another process (the operator CLI) waits up to
// the busy timeout for the file's write lock. Reads go through a separate
// read-only pool and never wait for a writer (WAL). Every write is one
// transaction: a crash before its commit leaves nothing of it, and a crash
// after it leaves all of it (synchronous=FULL by default).
//
// Each operation validates its input first (ErrInvalid, nothing written),
// then calls the transition rules of package turnframe on the rows as stored
// and writes back what they return. Driver errors are translated at the
// boundary: a UNIQUE violation is turnframe.ErrConflict, a cancelled context
// stays a context error, a file locked by another writer for longer than the
// busy timeout or a write the file system refused (a full disk) is
// turnframe.ErrBusy, and a call that meets a closed store is
// turnframe.ErrClosed.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/wake"
)

var _ turnframe.Store = (*Store)(nil)

// Store is a turnframe.Store over one SQLite file. It is safe for concurrent
// use, and several Stores, in one process or several, may open the same
// file: claims stay exclusive across all of them. Open one with Open; the
// zero value is not usable.
type Store struct {
	path        string
	write       *sql.DB   // one connection, BEGIN IMMEDIATE
	read        *sql.DB   // query_only
	stmts       *prepared // the write path's statements, on write (stmt.go)
	reads       reader    // read, with the read path's statements prepared (reader.go)
	ids         *turnframe.IDGenerator
	busyTimeout time.Duration

	mu     sync.Mutex     // guards closed, and calls.Add against Close's calls.Wait
	closed bool           // set by Close: every call from then on is ErrClosed
	calls  sync.WaitGroup // the calls in progress, which Close waits for

	enqueued wake.Broadcast // signalled by each Apply or ApplyTx that enqueued rows (notify.go)
}

// ErrBusy is turnframe.ErrBusy, the error a call wraps when it waited the
// whole busy timeout for a file that another connection (another Store,
// another process) kept locked (SQLITE_BUSY or SQLITE_LOCKED), or that met a
// write the file system refused (SQLITE_FULL, SQLITE_IOERR_WRITE: a full
// disk). Nothing was written; the call may be tried again. The name stays
// for the callers that used it; errors.Is(err, turnframe.ErrBusy) is the
// same test.
var ErrBusy = turnframe.ErrBusy

// Path returns the absolute path of the file the store opened.
func (s *Store) Path() string { return s.path }

// ReadDB returns the store's read-only pool, for operator tools that query
// the file directly (the schema is documented in package schema). A write
// through it fails with "attempt to write a readonly database". It is
// closed by Close; do not close it yourself.
func (s *Store) ReadDB() *sql.DB { return s.read }

// Close marks the store closed, closes its prepared statements and both
// pools, and then waits for the calls in progress to return. It never waits
// for a transaction from BeginTx: closing the pools fails at once every
// call that is waiting for the writer connection that transaction holds
// (with an error wrapping turnframe.ErrClosed), so Close returns while the
// transaction is still open. That transaction's Commit and Rollback still
// work; when it ends, its connection is closed. Every call after Close
// (ApplyTx on that transaction included), Close included, returns an error
// wrapping turnframe.ErrClosed. A transaction the caller never ends keeps
// its connection, and the file's write lock, until the process exits.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("sqlitestore: close: %w", turnframe.ErrClosed)
	}
	s.closed = true
	s.mu.Unlock()
	s.enqueued.Signal() // a Run waiting for an enqueue claims once more, and finds the store closed
	// database/sql's Close fails the calls queued for a connection and
	// closes a connection in use once it is put back: nothing here waits
	// for a transaction.
	err := errors.Join(s.stmts.close(), s.reads.p.close(), s.write.Close(), s.read.Close())
	s.calls.Wait()
	return err
}

// enter marks a call in progress, so Close waits for it, or returns
// ErrClosed. The caller calls the returned function when it is done.
func (s *Store) enter(op string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, turnframe.ErrClosed)
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
// error met while the store is closing is also ErrClosed: database/sql
// reports a closed pool with an error of its own ("sql: database is
// closed"), which the caller could not tell from a broken file.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	err = translate(ctx, err)
	if s.isClosed() && !errors.Is(err, turnframe.ErrClosed) {
		return fmt.Errorf("sqlitestore: %s: %w: %w", op, turnframe.ErrClosed, err)
	}
	return fmt.Errorf("sqlitestore: %s: %w", op, err)
}
