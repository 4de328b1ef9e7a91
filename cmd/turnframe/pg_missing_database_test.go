package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// A --db URL naming a database the server does not have (a typo, SQLSTATE
// 3D000) cannot succeed however often it is tried, as a --db file that does
// not exist cannot: exit 2, saying nothing was created. It exited 1, "could
// not be done now (busy, I/O)", so a script that retries on 1 retried for
// ever.
func TestPGAMissingDatabaseIsRefusedWithExitTwo(t *testing.T) {
	u, err := url.Parse(pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/turnframe_no_such_database"
	db := u.String()
	for _, args := range [][]string{
		{"status"}, {"version"}, {"migrate"}, {"settle", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed"},
	} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(args, "--db", db)...)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.Equal(code, exitUsage)                                                        // cannot succeed as given
			is.True(strings.Contains(stderr, `"turnframe_no_such_database" does not exist`)) // says which
		})
	}
}
