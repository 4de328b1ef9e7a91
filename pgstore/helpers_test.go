package pgstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe/pgstore"
)

// urlEnv names the environment variable that holds the URL of the
// PostgreSQL server the tests run against.
const urlEnv = "TURNFRAME_PG_URL"

// serverURL returns the test server's URL. Without one the test is skipped
// with a message that says how to start a server, or fails under CI=true,
// where a missing server must not pass for a green run.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(urlEnv)
	if u != "" {
		return u
	}
	msg := "pgstore: " + urlEnv + " is not set, so the PostgreSQL tests cannot run. Start a local server " +
		"and set it with: export " + urlEnv + "=$(sudo scripts/pg-start.sh)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a missing server fails the run)")
	}
	t.Skip("SKIPPED — " + msg)
	return ""
}

// freshSchema creates a schema of its own for t on the test server, dropped
// (with everything in it) when t ends, and returns the server URL with that
// schema as the connection's search_path: a store opened on it sees only
// the tables it creates.
func freshSchema(t testing.TB) string {
	t.Helper()
	base := serverURL(t)
	ctx := context.Background()
	schema := "t_" + strings.ToLower(rand.Text())
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", urlEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema)
}

// withSearchPath returns u with search_path set to schema, a runtime
// parameter pgx sends when it connects.
func withSearchPath(t testing.TB, u, schema string) string {
	t.Helper()
	if strings.Contains(u, "://") {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatalf("parse %s: %v", urlEnv, err)
		}
		q := parsed.Query()
		q.Set("search_path", schema)
		parsed.RawQuery = q.Encode()
		return parsed.String()
	}
	return fmt.Sprintf("%s search_path=%s", u, schema) // key=value form
}

// mustOpen opens a store on a fresh schema, closed when t ends.
func mustOpen(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), freshSchema(t), opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
