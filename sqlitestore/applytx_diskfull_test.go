package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// ApplyTx: "w is written under a savepoint: after an error, tx holds nothing
// of w and everything the caller wrote before, so the caller may go on and
// commit its own rows."
//
// A Write large enough to spill SQLite's page cache (an outbox payload of a
// few MiB, under MaxPayloadLen) writes pages to the WAL before the commit.
// When the disk is full then, SQLite rolls the whole transaction back — the
// caller's rows too — and the connection is back in autocommit: ApplyTx's
// error says to roll back, but the caller's rows written before are gone,
// the rows it writes after are committed one statement at a time, outside
// any transaction, and its Commit fails.
//
// The disk is filled with RLIMIT_FSIZE in a child process (SIGXFSZ ignored).
func TestApplyTxOnAFullDiskKeepsTheCallersTransaction(t *testing.T) {
	if !inDiskFullChild(t, "TURNFRAME_TEST_APPLYTX_DISKFULL_CHILD") {
		return
	}
	is := is.New(t)
	ctx := context.Background()
	disk := newDiskLimit(t)

	path, s, tx := appNotesStore(t)
	is.NoErr(tx.Commit()) // the application's own table

	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{
		Destination: "archive", Payload: []byte(strings.Repeat("x", 6<<20)), // 6 MiB: more than the page cache holds
	})
	_, err := s.Apply(ctx, prepare)
	is.NoErr(err)

	tx, err = s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES ('before')")
	is.NoErr(err) // the caller's own row, in its transaction

	disk.fill()
	_, err = s.ApplyTx(ctx, tx, commit)
	t.Logf("ApplyTx: %v", err)
	disk.unfill()

	_, err = tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES ('after')")
	is.NoErr(err)
	cerr := tx.Commit()
	t.Logf("Commit: %v", cerr)

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err)
	defer db.Close()
	var notes string
	is.NoErr(db.QueryRowContext(ctx, "SELECT coalesce(group_concat(note, ','), '') FROM app_notes").Scan(&notes))
	t.Logf("app_notes committed: %q", notes)
	is.NoErr(cerr)                  // the caller may go on and commit its own rows
	is.Equal(notes, "before,after") // all of them, in one transaction
}

// ApplyTx: "That holds on a full disk too: the writer keeps a transaction's
// changed pages in memory until its COMMIT (no cache spill), so a full disk
// fails the caller's COMMIT, not a statement of w". DESIGN.md §13: "a full
// disk fails a COMMIT, never a statement halfway through a transaction".
//
// cache_spill(0) keeps the WAL untouched, but not the savepoint's own
// journal: ApplyTx writes w under a SAVEPOINT, and SQLite keeps the prior
// image of every page w changes that existed when the savepoint opened (here
// the pages of a big row the caller deleted earlier in its transaction,
// which w's outbox row reuses) in a sub-journal, which leaves memory for a
// temporary file past 64 KiB (SQLITE_TEMP_STORE=1: temp files on disk). That
// write fails on a full disk, in the middle of w's INSERT, and SQLite rolls
// the whole transaction back: the caller's own writes with it.
func TestApplyTxOnAFullDiskSubJournalKeepsTheCallersTransaction(t *testing.T) {
	if !inDiskFullChild(t, "TURNFRAME_TEST_APPLYTX_SUBJ_CHILD") {
		return
	}
	is := is.New(t)
	ctx := context.Background()
	disk := newDiskLimit(t)

	path, s, tx := appNotesStore(t)
	// The application once kept a big note, and deleted it: its pages are
	// on the file's free list.
	_, err := tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES (?)", strings.Repeat("y", 2<<20))
	is.NoErr(err)
	is.NoErr(tx.Commit())

	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{
		Destination: "archive", Payload: []byte(strings.Repeat("x", 1<<20)), // 1 MiB: within the cache
	})
	_, err = s.Apply(ctx, prepare)
	is.NoErr(err)

	tx, err = s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "DELETE FROM app_notes")
	is.NoErr(err) // the caller drops its big note…
	_, err = tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES ('before')")
	is.NoErr(err) // …and writes its own row, in its transaction

	disk.fill()
	_, err = s.ApplyTx(ctx, tx, commit)
	disk.unfill()
	t.Logf("ApplyTx: %v", err)

	// What the caller's transaction holds now: its delete and its row, as
	// before ApplyTx, if "tx holds nothing of w and everything the caller
	// wrote before" on a full disk too.
	notes := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var n string
		is.NoErr(q.QueryRowContext(ctx, "SELECT coalesce(group_concat(CASE WHEN length(note) > 100 THEN 'big' ELSE note END, ','), '') FROM app_notes").Scan(&n))
		return n
	}
	inTx := notes(tx)
	t.Logf("the caller's transaction holds: %q", inTx)
	_, err = tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES ('after')")
	t.Logf("the caller's next row: %v", err)
	t.Logf("its Commit: %v", tx.Commit())
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err)
	defer db.Close()
	t.Logf("app_notes committed: %q", notes(db))
	is.Equal(inTx, "before") // the caller's own writes are still in its transaction
}

// inDiskFullChild runs the test t again in a child process, with env set,
// and fails t when the child fails: the child fills the disk with
// RLIMIT_FSIZE (SIGXFSZ ignored, so a write past it fails with EFBIG), which
// holds for the whole process. It reports whether t is the child, which
// then does the work.
func inDiskFullChild(t *testing.T, env string) bool {
	if os.Getenv(env) == "1" {
		signal.Ignore(syscall.SIGXFSZ)
		return true
	}
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("child:\n%s", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	is.NoErr(err) // the child's assertions hold
	return false
}

// diskLimit fills and frees the disk of the child process.
type diskLimit struct{ free syscall.Rlimit }

func newDiskLimit(t *testing.T) *diskLimit {
	d := &diskLimit{}
	is.New(t).NoErr(syscall.Getrlimit(syscall.RLIMIT_FSIZE, &d.free))
	t.Cleanup(d.unfill)
	return d
}

func (d *diskLimit) fill() {
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: d.free.Max})
}

func (d *diskLimit) unfill() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &d.free) }

// appNotesStore opens a store in a new file and begins a transaction that
// creates the application's own table, app_notes, for the caller to go on
// with and commit.
func appNotesStore(t *testing.T) (path string, s *sqlitestore.Store, tx *sql.Tx) {
	is := is.New(t)
	path = filepath.Join(t.TempDir(), "turnframe.db")
	s = mustOpenPath(t, path)
	tx, err := s.BeginTx(context.Background())
	is.NoErr(err)
	_, err = tx.ExecContext(context.Background(), "CREATE TABLE app_notes (note TEXT NOT NULL)")
	is.NoErr(err)
	return path, s, tx
}
