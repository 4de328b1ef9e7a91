package main

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// A URL's scheme is case-insensitive (RFC 3986): "Postgres://…" and
// "POSTGRESQL://…" name a PostgreSQL server as "postgres://…" does. Neither
// they nor a URL of a scheme turnframe does not read ("mysql://…"), taken
// for a file, ever show the URL's password (DESIGN §14: no output does).
func TestAnUppercaseSchemeNeverShowsThePassword(t *testing.T) {
	const secret = "s3cretpw"
	for _, db := range []string{
		"Postgres://alice:" + secret + "@127.0.0.1:1/app?connect_timeout=2",
		"POSTGRESQL://alice:" + secret + "@127.0.0.1:1/app?connect_timeout=2",
		"mysql://alice:" + secret + "@127.0.0.1:1/app",
	} {
		for _, command := range []string{"status", "migrate", "version"} {
			t.Run(command+"_"+db[:strings.Index(db, ":")], func(t *testing.T) {
				is := is.New(t)
				code, stdout, stderr := cli(t, command, "--db", db)
				is.True(code != exitOK)                                        // nothing to open there
				is.True(!strings.Contains(stdout+stderr, secret))              // the password is never shown
				is.True(strings.Contains(stderr, "alice:xxxxx@"))              // the URL is, masked
				is.True(!strings.Contains(stderr, "no turnframe database at")) // it is not taken for a missing file
			})
		}
	}
	t.Run("IsPostgresURLIgnoresTheSchemesCase", func(t *testing.T) {
		is := is.New(t)
		is.True(isPostgresURL("Postgres://h/db"))
		is.True(isPostgresURL("postgresql://h/db"))
		is.True(!isPostgresURL("postgres.db"))
		is.True(!isPostgresURL("./Postgres:/x"))
	})
}
