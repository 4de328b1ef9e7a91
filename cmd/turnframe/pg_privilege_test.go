package main

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// asRole returns db as a role of the test's own, made with grant (run with
// the role's name in place of {role}), dropped when t ends: the role the
// connection takes at start-up (a URL's role parameter, SET ROLE), which
// needs no login of its own.
func asRole(t *testing.T, db, grant string) string {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	role := "tf_role_" + strings.ToLower(rand.Text())
	conn, err := pgx.Connect(ctx, db)
	is.NoErr(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE ROLE "+role+" NOLOGIN; "+strings.ReplaceAll(grant, "{role}", role))
	is.NoErr(err) // make the role
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, db)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	u, err := url.Parse(db)
	is.NoErr(err)
	q := u.Query()
	q.Set("role", role)
	u.RawQuery = q.Encode()
	return u.String()
}

// A role the database does not let read or write the turnframe tables
// (SQLSTATE 42501, permission denied) cannot succeed however often it is
// tried, as a login the server refuses cannot: exit 2, saying the role may
// not, and, for a write, that nothing was changed. Every command exited 1,
// "could not be done now", with the driver's words.
func TestPGARoleWithoutThePrivilegeExitsTwo(t *testing.T) {
	f := mustPGFixture(t)
	none := asRole(t, f.path, "GRANT USAGE ON SCHEMA "+searchPath(t, f.path)+" TO {role}")
	readOnly := asRole(t, f.path, "GRANT USAGE ON SCHEMA "+searchPath(t, f.path)+" TO {role}; "+
		"GRANT SELECT ON ALL TABLES IN SCHEMA "+searchPath(t, f.path)+" TO {role}")
	for _, c := range []struct {
		name string
		db   string
		args []string
	}{
		{"NoPrivilege/status", none, []string{"status"}},
		{"NoPrivilege/version", none, []string{"version"}},
		{"NoPrivilege/migrate", none, []string{"migrate"}},
		{"ReadOnly/settle", readOnly, []string{"settle", f.unknown.String(), "completed"}},
		{"ReadOnly/requeue", readOnly, []string{"requeue", f.failed.String()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(c.args, "--db", c.db)...)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.Equal(code, exitUsage)                              // cannot succeed as given
			is.True(strings.Contains(stderr, "permission denied")) // the server's words
			is.True(strings.Contains(stderr, "a role that may"))   // and what to do
		})
	}
	rec, err := openPGFixture(t, f).GetOutbox(context.Background(), f.unknown)
	if err != nil || rec.Status != turnframe.OutboxOutcomeUnknown {
		t.Errorf("the refused settle changed the row: %v, %v", rec.Status, err)
	}
}

// searchPath is the schema db's search_path names.
func searchPath(t *testing.T, db string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.Identifier{u.Query().Get("search_path")}.Sanitize()
}

// migrate's own word for a role that may not create turnframe's tables
// (what to do: migrate as the schema's owner) is kept, not replaced by the
// general one.
func TestPGMigrateByARoleThatMayNotCreateSaysSo(t *testing.T) {
	is := is.New(t)
	db := pgSchema(t)
	role := asRole(t, db, "GRANT USAGE ON SCHEMA "+searchPath(t, db)+" TO {role}")
	code, _, stderr := cli(t, "migrate", "--db", role)
	t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
	is.Equal(code, exitUsage)                                            // cannot succeed as given
	is.True(strings.Contains(stderr, "may not change the schema there")) // migrate's own words
	is.True(strings.Contains(stderr, "as a role that owns the schema"))  // and what to do
}
