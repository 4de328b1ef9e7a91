package main

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// A long --busy-timeout (a month: the operator means "wait as long as it
// takes") opens the database and runs the command, on a file and on a
// PostgreSQL URL alike. SQLite's busy_timeout is clamped to its 32-bit
// milliseconds (79409ed); PostgreSQL's lock_timeout is a 32-bit count of
// milliseconds too, and a value past it makes the server refuse the
// connection, so every command fails before it reads anything.
func TestALongBusyTimeoutStillOpensTheDatabase(t *testing.T) {
	for _, db := range []string{"file", "postgres"} {
		t.Run(db, func(t *testing.T) {
			is := is.New(t)
			var f fixture
			if db == "file" {
				f = mustFixture(t)
			} else {
				f = mustPGFixture(t)
			}
			code, out, stderr := cli(t, "status", "--db", f.path, "--busy-timeout", "720h")
			t.Logf("stderr: %s", stderr)
			is.Equal(stderr, "")
			is.Equal(code, exitOK)
			is.True(strings.Contains(out, "pending 3"))
		})
	}
}
