package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// A --busy-timeout under a millisecond is a usage error for every command
// that opens a database, on a file and on a PostgreSQL URL alike: SQLite
// would fail at once on any lock and PostgreSQL's lock_timeout of 0 would
// wait for ever, so neither is passed on. The refusal comes before the
// database is opened: no file is created, no server is asked, and the
// URL's password is not printed.
func TestBusyTimeoutUnderAMillisecondIsRefused(t *testing.T) {
	const secret = "s3cret-pw"
	pgURL := "postgres://op:" + secret + "@127.0.0.1:1/app?sslmode=disable" // nothing listens on port 1
	for _, db := range []string{"file", "postgres"} {
		for _, cmd := range []string{"status", "migrate", "ui"} {
			for _, busy := range []string{"0", "500us", "-1s"} {
				t.Run(db+"/"+cmd+"/"+busy, func(t *testing.T) {
					is := is.New(t)
					path := filepath.Join(t.TempDir(), "app.db")
					target := path
					if db == "postgres" {
						target = pgURL
					}
					code, stdout, stderr := cli(t, cmd, "--db", target, "--busy-timeout", busy)
					is.Equal(code, exitUsage)                                                // a usage error
					is.True(strings.Contains(stderr, "--busy-timeout must be at least 1ms")) // says why
					is.True(!strings.Contains(stdout+stderr, secret))                        // no password
					_, err := os.Stat(path)
					is.True(os.IsNotExist(err)) // no file created
				})
			}
		}
	}
}
