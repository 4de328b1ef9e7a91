package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// readOnlyDir makes dir read-only for this process: an operator who may
// read the application's file but not write its directory, a backup on a
// read-only mount. As root (whom mode bits do not stop) it marks the
// directory immutable until t ends.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
}

// A turnframe file in a directory this user may not write, with no -wal and
// -shm beside it (the application stopped), cannot be read: SQLite must
// create them to read a WAL database. Every command said the file "is not a
// turnframe database", which it is, sending the operator after another
// file or a damaged one. It says it could not open the file, and why.
func TestAFileInADirectoryItMayNotWriteIsNotCalledNotATurnframeDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "app.db")
	code, _, _ := cli(t, "migrate", "--db", db)
	if code != exitOK {
		t.Fatal("migrate a new file")
	}
	readOnlyDir(t, dir)
	for _, args := range [][]string{{"status"}, {"version"}, {"settle", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed"}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(args, "--db", db)...)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.True(code != exitOK)
			is.True(!strings.Contains(stderr, "is not a turnframe database")) // it is one
			is.True(strings.Contains(stderr, "directory"))                    // says where to look
		})
	}
}
