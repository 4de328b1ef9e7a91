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
// stays a context error, and a file locked by another writer for longer than
// the busy timeout is ErrBusy.
package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
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
	ids         *turnframe.IDGenerator
	busyTimeout time.Duration

	mu     sync.RWMutex // held shared by every call; Close takes it exclusively
	closed bool
}

// ErrBusy is wrapped by the error of a write that waited the whole busy
// timeout for a file another connection (another Store, another process)
// kept locked for writing. Nothing was written; the write may be tried again.
var ErrBusy = errors.New("sqlitestore: database busy")

// Path returns the absolute path of the file the store opened.
func (s *Store) Path() string { return s.path }

// ReadDB returns the store's read-only pool, for operator tools that query
// the file directly (the schema is documented in package schema). A write
// through it fails with "attempt to write a readonly database". It is
// closed by Close; do not close it yourself.
func (s *Store) ReadDB() *sql.DB { return s.read }

// Close closes the prepared statements and both pools. It waits for the calls in progress to return; a
// transaction from BeginTx that is still open is rolled back when the
// connection goes. Every call after Close, Close included, returns an error
// wrapping turnframe.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sqlitestore: close: %w", turnframe.ErrClosed)
	}
	s.closed = true
	return errors.Join(s.stmts.close(), s.write.Close(), s.read.Close())
}

// enter marks a call in progress, so Close waits for it, or returns
// ErrClosed. The caller calls the returned function when it is done.
func (s *Store) enter(op string) (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, turnframe.ErrClosed)
	}
	return s.mu.RUnlock, nil
}
