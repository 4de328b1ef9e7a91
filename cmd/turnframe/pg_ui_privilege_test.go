package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A role the database does not let read or write the turnframe tables
// (SQLSTATE 42501) is the page's own, not the operator's bad request: the
// page answers 403 (refused: no retry makes it, as the CLI exits 2), says the
// role may not and what to do, and logs it for whoever started the page. It
// was answered 400, as a malformed form.
func TestPGTheUIAnswersARoleWithoutThePrivilegeForbidden(t *testing.T) {
	is := is.New(t)
	f := mustPGFixture(t)
	schema := searchPath(t, f.path)
	role := asRole(t, f.path, "GRANT USAGE ON SCHEMA "+schema+" TO {role}; "+
		"GRANT SELECT ON ALL TABLES IN SCHEMA "+schema+" TO {role}")
	var stderr bytes.Buffer
	e := &env{stdout: &bytes.Buffer{}, stderr: &stderr, now: time.Now, page: 3}
	db := &dbFlags{path: role, busy: time.Second}
	store, err := db.open(context.Background(), e)
	is.NoErr(err) // a role that may read opens the page
	defer store.Close()
	s, err := newUIServer(store, db, e, uiOptions{loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	u := &testUI{t: t, srv: srv, ui: s}
	code, _ := u.get("/")
	is.Equal(code, http.StatusOK) // it may read

	form := settleForm(s.token, f.unknown, "completed", "")
	form.Set("attempt", "1")
	code, body := u.post("/settle", form, nil)
	t.Logf("settle: %d %s", code, body)
	is.Equal(code, http.StatusForbidden)                  // the role may not write: refused, not a bad request
	is.True(strings.Contains(body, "permission denied"))  // the server's words
	is.True(strings.Contains(body, "a role that may"))    // and what to do
	is.True(strings.Contains(body, "Nothing changed"))    // a write says nothing changed
	is.True(strings.Contains(stderr.String(), "/settle")) // logged for whoever started the page
	rec, err := openPGFixture(t, f).GetOutbox(context.Background(), f.unknown)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // nothing written

	owner, err := pgx.Connect(context.Background(), f.path)
	is.NoErr(err)
	defer owner.Close(context.Background())
	ru, err := url.Parse(role)
	is.NoErr(err)
	_, err = owner.Exec(context.Background(), "REVOKE SELECT ON ALL TABLES IN SCHEMA "+schema+" FROM "+ru.Query().Get("role"))
	is.NoErr(err) // the role may no longer read either
	code, body = u.get("/")
	t.Logf("overview: %d %s", code, body)
	is.Equal(code, http.StatusForbidden)                 // a read refused is refused too
	is.True(strings.Contains(body, "permission denied")) // the server's words
	is.True(!strings.Contains(body, "Nothing changed"))  // a read changes nothing to begin with
}
