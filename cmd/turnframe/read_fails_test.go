package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// readsFail is an opStore whose reads of one row or entry fail as they do
// when the database cannot answer now: a PostgreSQL server restarting or
// failing over between the command's open and its read, a statement past
// statement_timeout, a SQLite file another connection holds exclusively.
type readsFail struct{ opStore }

var errReadBusy = fmt.Errorf("%w: the server closed the connection", turnframe.ErrBusy)

func (readsFail) GetOutbox(context.Context, turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	return turnframe.OutboxRecord{}, errReadBusy
}

func (readsFail) ByKey(context.Context, turnframe.AccountID, turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	return turnframe.JournalEntry{}, errReadBusy
}

// A write whose first read of its row or entry fails for a reason other
// than its absence tells the operator the row or entry does not exist
// ("no outbox row ID", "account A has no journal entry under the key K"):
// they go looking for a typo or a prune, while the row is there and a retry
// would do. Exit status and HTTP status follow the error (1, 503); the words
// must too.
func TestAFailedReadIsNeverReportedAsNoSuchRow(t *testing.T) {
	f := mustFixture(t)
	store := openFixture(t, f)
	ops := readsFail{sqliteOps{store}}
	ctx := context.Background()
	db := &dbFlags{path: f.path, busy: 50 * time.Millisecond}
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	rec := turnframe.NewRecovery(ops)
	lies := []string{"no outbox row", "has no journal entry"}
	check := func(t *testing.T, err error) {
		is := is.New(t)
		is.True(err != nil)
		is.True(errors.Is(err, turnframe.ErrBusy)) // the cause is kept
		for _, lie := range lies {
			is.True(!strings.Contains(err.Error(), lie)) // the row or entry is there: it could not be read
		}
	}
	t.Run("SettleARow", func(t *testing.T) {
		check(t, settleRow(ctx, e, ops, rec, settleRequest{id: f.unknown,
			decision: turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator}}, db))
	})
	t.Run("SettleAnEntry", func(t *testing.T) {
		check(t, settleEntry(ctx, e, ops, rec, settleRequest{entry: true, account: fixtureAccount, key: "key-ask-remote",
			decision: turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator}}, db))
	})
	t.Run("ForceRelease", func(t *testing.T) {
		check(t, forceRelease(ctx, e, ops, f.claimed, requeueFence{}, time.Now()))
	})
	s, err := newUIServer(ops, db, e, uiOptions{loopback: true, actor: turnframe.ActorOperator})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name, path string
		form       url.Values
	}{
		{"ThePagesRowSettle", "/settle", url.Values{"kind": {"row"}, "id": {f.unknown.String()}, "attempt": {"1"}, "verdict": {"completed"}}},
		{"ThePagesEntrySettle", "/settle", url.Values{"kind": {"entry"}, "account": {"acme"}, "key": {"key-ask-remote"}, "verdict": {"completed"}}},
		{"ThePagesRequeue", "/requeue", url.Values{"id": {f.failed.String()}, "attempts": {"1"}}},
		{"ThePagesApprove", "/approve", url.Values{"account": {"acme"}, "key": {"key-ask-remote"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			c.form.Set("token", s.token)
			req, err := http.NewRequest(http.MethodPost, srv.URL+c.path, strings.NewReader(c.form.Encode()))
			is.NoErr(err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", srv.URL)
			res, err := http.DefaultClient.Do(req)
			is.NoErr(err)
			code, body := readResponse(t, res)
			is.Equal(code, http.StatusServiceUnavailable) // busy: try again
			for _, lie := range lies {
				is.True(!strings.Contains(body, lie)) // the page must not say it does not exist
			}
		})
	}
}

// The same holds where the operator only looks: "history --account A K"
// and the page's entry view named a failed read "no journal entry" too.
func TestAFailedReadIsNeverReportedAsNoSuchEntryWhereTheOperatorOnlyLooks(t *testing.T) {
	f := mustFixture(t)
	store := openFixture(t, f)
	ops := readsFail{sqliteOps{store}}
	db := &dbFlags{path: f.path, busy: 50 * time.Millisecond}
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	const lie = "has no journal entry"
	t.Run("History", func(t *testing.T) {
		is := is.New(t)
		find, err := parseHistoryArgs([]string{"key-ask-remote"}, string(fixtureAccount))
		is.NoErr(err)
		_, err = find(context.Background(), ops)
		is.True(errors.Is(err, turnframe.ErrBusy))   // the cause is kept
		is.True(!strings.Contains(err.Error(), lie)) // the entry is there: it could not be read
		is.True(strings.Contains(err.Error(), "could not read"))
	})
	t.Run("ThePagesEntryView", func(t *testing.T) {
		is := is.New(t)
		s, err := newUIServer(ops, db, e, uiOptions{loopback: true})
		is.NoErr(err)
		srv := httptest.NewServer(s.handler())
		t.Cleanup(srv.Close)
		res, err := http.Get(srv.URL + "/entry?" + url.Values{"account": {string(fixtureAccount)}, "key": {"key-ask-remote"}}.Encode())
		is.NoErr(err)
		code, body := readResponse(t, res)
		is.Equal(code, http.StatusServiceUnavailable) // busy: try again
		is.True(!strings.Contains(body, lie))         // the page must not say it does not exist
	})
}
