// Package bench measures turnframe against what SQLite itself can do on the
// same machine (the raw ceilings) and against the Go libraries an
// application would pick instead (River on its SQLite driver, goqite), and,
// on a PostgreSQL server, pgstore against River on its pgx driver.
//
// It is its own module so that the library's go.mod never carries the peers.
// Every contender runs on a fresh file in one folder with the same journal
// mode (WAL), the same synchronous setting, the same 256-byte payloads and
// the same row counts; cmd/compare runs them all in one process run,
// interleaved, and prints ratios, which survive a noisy machine where
// absolute figures do not.
package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver turnframe uses, registered as "sqlite"
)

// PayloadSize is the size of every message body every contender sends.
const PayloadSize = 256

// Sync is a synchronous setting, FULL or NORMAL.
type Sync string

// The two settings every workload is reported at.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Payload returns a fresh random 256-byte body.
func Payload() []byte {
	b := make([]byte, PayloadSize)
	rand.Read(b)
	return b
}

// DSN returns the modernc DSN every raw and peer contender opens: WAL, the
// given synchronous setting, a busy timeout (two processes share a file in
// one workload) and foreign keys on, the same pragmas sqlitestore sets.
// immediate makes BeginTx send BEGIN IMMEDIATE, so a transaction that reads
// then writes waits for the lock instead of failing with SQLITE_BUSY.
func DSN(path string, s Sync, immediate bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(s)+")")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if immediate {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// OpenDB opens path with DSN and a pool of conns connections, and checks
// that the pragmas took: trust, then verify.
func OpenDB(ctx context.Context, path string, s Sync, immediate bool, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", DSN(path, s, immediate))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := CheckPragmas(ctx, db, s); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// CheckPragmas verifies that db runs in WAL mode at the synchronous setting s.
func CheckPragmas(ctx context.Context, db *sql.DB, s Sync) error {
	var mode string
	var syncN int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncN); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	want := map[Sync]int{SyncNormal: 1, SyncFull: 2}[s]
	if !strings.EqualFold(mode, "wal") || syncN != want {
		return fmt.Errorf("pragmas: journal_mode=%s synchronous=%d, want wal and %d (%s)", mode, syncN, want, s)
	}
	return nil
}

// SQLiteVersion returns select sqlite_version() from a throwaway database.
func SQLiteVersion(ctx context.Context) (string, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, "select sqlite_version()").Scan(&v)
	return v, err
}

// Folder hands out fresh database files inside one temporary folder, so
// every contender runs on the same disk.
type Folder struct {
	Dir string
	n   atomic.Int64
}

// NewFolder makes a temporary folder under dir ("" for the system default).
func NewFolder(dir string) (*Folder, error) {
	d, err := os.MkdirTemp(dir, "turnframe-bench-")
	if err != nil {
		return nil, err
	}
	return &Folder{Dir: d}, nil
}

// File returns the path of a new, not yet existing database file named
// after what it holds.
func (f *Folder) File(name string) string {
	return filepath.Join(f.Dir, fmt.Sprintf("%03d-%s.db", f.n.Add(1), name))
}

// Remove deletes a database file and its WAL and shared-memory files, so a
// long run does not fill the disk.
func Remove(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// Close removes the folder and everything in it.
func (f *Folder) Close() error { return os.RemoveAll(f.Dir) }

// Measure is one timed run: how many rows (or turns) in how long, plus any
// figures the workload adds (transactions per turn, latency, peak memory).
type Measure struct {
	N       int
	Elapsed time.Duration
	Extra   map[string]float64
}

// PerSecond is N divided by the elapsed time.
func (m Measure) PerSecond() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.N) / m.Elapsed.Seconds()
}

// inTx runs f in one transaction of db and commits it; it rolls back when f
// fails or panics.
func inTx(ctx context.Context, db *sql.DB, f func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = f(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// appSchema is the application table every enqueue-in-tx contender writes
// one row to, in the same transaction as its message.
const appSchema = `CREATE TABLE IF NOT EXISTS app_rows (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)`
