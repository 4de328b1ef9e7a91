package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// A --db URL the server will not let in — a role that does not exist (a
// typo, SQLSTATE 28000 under peer or trust authentication), a wrong
// password (28P01) — cannot succeed however often it is tried, as a
// database that does not exist cannot: exit 2, saying it cannot log in. It
// exited 1, "could not be done now", so a script that retries on 1 retried
// for ever.
func TestPGALoginTheServerRefusesExitsTwo(t *testing.T) {
	base := pgtest.ServerURL(t)
	cfg, err := pgconn.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	// As the URL reaches the server (the test cluster's Unix socket: peer
	// authentication, 28000), and over TCP with a password (a fresh
	// Debian cluster's scram-sha-256: 28P01).
	socket, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	socket.User = url.User("turnframe_no_such_role")
	tcp := fmt.Sprintf("postgres://turnframe_no_such_role:not-the-password@127.0.0.1:%d/%s", cfg.Port, url.PathEscape(cfg.Database))
	for _, db := range []struct{ name, url string }{{"AsGiven", socket.String()}, {"OverTCPWithAPassword", tcp}} {
		for _, args := range [][]string{
			{"status"}, {"version"}, {"migrate"}, {"settle", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed"},
		} {
			t.Run(db.name+"/"+args[0], func(t *testing.T) {
				is := is.New(t)
				code, _, stderr := cli(t, append(args, "--db", db.url)...)
				t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
				if db.name == "OverTCPWithAPassword" && !strings.Contains(stderr, "cannot log in") {
					t.Skip("the server takes no TCP connection on 127.0.0.1 here")
				}
				is.True(strings.Contains(stderr, "cannot log in"))     // says what failed
				is.True(!strings.Contains(stderr, "not-the-password")) // never the password
				is.Equal(code, exitUsage)                              // cannot succeed as given
			})
		}
	}
}
