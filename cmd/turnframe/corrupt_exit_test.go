package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// The exit status is documented: 2 "cannot succeed as given (… not a
// turnframe database …)", and version's help: "A file or database that is
// not a turnframe database is an error (exit 2)." A turnframe file cut in
// half (a copy that stopped, a disk that lost its tail) is refused by every
// command as "not a turnframe database", but version and migrate said so
// with exit 1, "could not be done now": a script that retries on 1 retries
// for ever, and one command's verdict on the file differs from another's.
func TestACorruptFileIsRefusedWithExitTwoByEveryCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	if code, _, stderr := cli(t, "migrate", "--db", good); code != exitOK {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.db")
	if err := os.WriteFile(cut, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"outbox"}, {"turns"}, {"version"}, {"migrate"}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(args, "--db", cut)...)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.Equal(code, exitUsage) // cannot succeed as given: not a turnframe database
		})
	}
}

// migrate on a SQLite file of another application whose table "turns" has
// another shape cannot succeed however often it is tried: migration 1
// fails ("table turns already exists"). It exited 1, "could not be done
// now (busy, I/O)", inviting a retry for ever — and left a
// goose_db_version table of its own in the other application's file, which
// TestMigrateRefusingAnotherApplicationsFileLeavesItUnchanged now rules out.
func TestMigrateOfAnotherApplicationsFileIsRefusedWithExitTwo(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	_, err = db.Exec("CREATE TABLE turns (player TEXT, score INTEGER); INSERT INTO turns VALUES ('ann', 3)")
	is.NoErr(err)
	is.NoErr(db.Close())
	before, err := os.ReadFile(path)
	is.NoErr(err)

	code, _, stderr := cli(t, "migrate", "--db", path)
	after, err := os.ReadFile(path)
	is.NoErr(err)
	t.Logf("exit %d: %s (file changed: %v)", code, strings.TrimSpace(stderr), !bytes.Equal(before, after))
	is.Equal(code, exitUsage) // cannot succeed as given: not a turnframe database
}
