// Package pgtest gives tests a PostgreSQL server to run against: the
// server's URL from the environment, and a schema of a test's own on it,
// dropped when the test ends. pgstore's own tests, its crash harness and
// the CLI's PostgreSQL tests use it; an application's tests may too.
//
// Without a server a test is skipped with a message that says how to start
// one (scripts/pg-start.sh in this repository); under CI=true it fails, so
// that a missing server never passes for a green run.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// URLEnv names the environment variable that holds the URL (or key=value
// connection string) of the PostgreSQL server tests run against.
const URLEnv = "TURNFRAME_PG_URL"

// ServerURL returns the server's URL from URLEnv. When URLEnv is unset it
// skips t, saying how to start a server, or fails t under CI=true.
func ServerURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(URLEnv); u != "" {
		return u
	}
	msg := URLEnv + " is not set, so " + t.Name() + " cannot run against PostgreSQL. Start a local server " +
		"and set it with: export " + URLEnv + "=$(sudo scripts/pg-start.sh)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a missing server fails the run)")
	}
	t.Skip("SKIPPED — " + msg)
	return ""
}

// Schema creates a schema of t's own on the server (ServerURL), dropped
// with everything in it when t ends, and returns the server's URL with
// that schema as the connection's search_path: a store opened on it sees
// only the tables it creates. It fails t when the server refuses.
func Schema(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	schema := "t_" + strings.ToLower(rand.Text())
	if err := exec(base, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(base, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return WithParams(t, base, url.Values{"search_path": {schema}})
}

// exec runs one statement on a connection of its own.
func exec(u, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", URLEnv, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithParams returns u with params set (the first value of each) as
// runtime parameters, which pgx sends when it connects: search_path,
// lock_timeout, pool_max_conns and the like. u may be a URL or a key=value
// connection string. It fails t when u is not a URL it can parse.
func WithParams(t testing.TB, u string, params url.Values) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			u += fmt.Sprintf(" %s=%s", k, params.Get(k))
		}
		return u
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: parse the server's URL: %v", err)
	}
	q := parsed.Query()
	for k := range params {
		q.Set(k, params.Get(k))
	}
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
