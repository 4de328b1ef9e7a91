package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
)

// readOnlyFile makes file read-only for this process, its directory
// staying writable: a backup restored read-only, or an operator who may
// read the application's file but not write it. As root (whom mode bits do
// not stop) it marks the file immutable until t ends.
func readOnlyFile(t *testing.T, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(file, 0o400); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", file).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", file).Run() })
}

// The read-only commands read: status on a file this user may only read
// (a backup restored read-only, an operator without write access) prints
// the status, as it did before a probe in Open refused every file it cannot
// write (reverted).
func TestStatusReadsAFileItMayNotWrite(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "app.db")
	code, _, _ := cli(t, "migrate", "--db", db)
	is.Equal(code, exitOK) // migrated
	readOnlyFile(t, db)
	code, stdout, stderr := cli(t, "status", "--db", db)
	is.Equal(code, exitOK) // a status needs no write
	is.True(stdout != "")  // and prints it
	is.Equal(stderr, "")
}
