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
	if os.Getenv("TURNFRAME_TEST_APPLYTX_DISKFULL_CHILD") == "1" {
		applyTxDiskFullChild(t)
		return
	}
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyTxOnAFullDiskKeepsTheCallersTransaction$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TURNFRAME_TEST_APPLYTX_DISKFULL_CHILD=1")
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("child:\n%s", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	is.NoErr(err) // the child's assertions hold
}

func applyTxDiskFullChild(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	signal.Ignore(syscall.SIGXFSZ)
	var free syscall.Rlimit
	is.NoErr(syscall.Getrlimit(syscall.RLIMIT_FSIZE, &free))
	defer syscall.Setrlimit(syscall.RLIMIT_FSIZE, &free)

	path := filepath.Join(t.TempDir(), "turnframe.db")
	s := mustOpenPath(t, path)
	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "CREATE TABLE app_notes (note TEXT NOT NULL)")
	is.NoErr(err)
	is.NoErr(tx.Commit()) // the application's own table

	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{
		Destination: "archive", Payload: []byte(strings.Repeat("x", 6<<20)), // 6 MiB: more than the page cache holds
	})
	_, err = s.Apply(ctx, prepare)
	is.NoErr(err)

	tx, err = s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "INSERT INTO app_notes (note) VALUES ('before')")
	is.NoErr(err) // the caller's own row, in its transaction

	is.NoErr(syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: free.Max})) // the disk fills
	_, err = s.ApplyTx(ctx, tx, commit)
	t.Logf("ApplyTx: %v", err)
	is.NoErr(syscall.Setrlimit(syscall.RLIMIT_FSIZE, &free)) // the disk frees

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
