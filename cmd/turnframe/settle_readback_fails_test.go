package main

import (
	"context"
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

// busyAfterMove is an opStore whose ByKey, once the entry it reads is no
// longer outcome_unknown, fails as a read does while another connection
// holds the file (or PostgreSQL cancels a slow statement): the settlement
// landed, and the command's read of the entry after it fails.
type busyAfterMove struct{ opStore }

func (s busyAfterMove) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := s.opStore.ByKey(ctx, a, k)
	if err == nil && e.Status != turnframe.JournalOutcomeUnknown {
		return turnframe.JournalEntry{}, fmt.Errorf("by key: %w: a read waited past the busy timeout", turnframe.ErrBusy)
	}
	return e, err
}

// 'turnframe settle --account A KEY completed' and the page's settle form
// of a journal entry: the settlement commits; the read of the entry after
// it, which only names the entry's turn in the line printed, fails. The
// operator is told the write failed: the command exits 1 ("could not be
// done now: try again", and again is refused, exit 2), the page answers 503
// "Nothing changed: the database is busy. Try again" — while the entry is
// settled. A settlement of a row never fails on its read-back.
func TestASettledEntryIsNeverReportedAsNothingChanged(t *testing.T) {
	t.Run("TheCommand", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		store := openFixture(t, f)
		ctx := context.Background()
		ops := busyAfterMove{sqliteOps{store}}
		var out strings.Builder
		e := &env{stdout: &out, stderr: io.Discard, now: time.Now}
		rec := turnframe.NewRecovery(ops, turnframe.WithClock(e.now))
		req := settleRequest{entry: true, account: fixtureAccount, key: "key-ask-remote",
			decision: turnframe.Decision{Verdict: turnframe.VerdictCompleted, Code: "operator.completed", Actor: turnframe.ActorOperator}}
		err := settleEntry(ctx, e, ops, rec, req, &dbFlags{path: f.path, busy: 50 * time.Millisecond})
		got, gerr := store.ByKey(ctx, fixtureAccount, "key-ask-remote")
		is.NoErr(gerr)
		is.Equal(got.Status, turnframe.JournalCommitted)                       // the settlement landed
		is.NoErr(err)                                                          // so the command does not fail (exit 1: "try again")
		is.True(strings.Contains(out.String(), "outcome_unknown → committed")) // and says what it did
	})
	t.Run("ThePage", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		store := openFixture(t, f)
		ctx := context.Background()
		before, err := store.ByKey(ctx, fixtureAccount, "key-ask-remote")
		is.NoErr(err)
		e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
		s, err := newUIServer(busyAfterMove{sqliteOps{store}}, &dbFlags{path: f.path, busy: 50 * time.Millisecond}, e,
			uiOptions{loopback: true, actor: turnframe.ActorOperator})
		is.NoErr(err)
		srv := httptest.NewServer(s.handler())
		t.Cleanup(srv.Close)
		form := url.Values{"token": {s.token}, "kind": {"entry"}, "account": {string(fixtureAccount)}, "key": {"key-ask-remote"},
			"attempt": {before.Attempt.String()}, "verdict": {"completed"}, "note": {"the remote has it"}}
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/settle", strings.NewReader(form.Encode()))
		is.NoErr(err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		code, body := readResponse(t, res)
		got, err := store.ByKey(ctx, fixtureAccount, "key-ask-remote")
		is.NoErr(err)
		is.Equal(got.Status, turnframe.JournalCommitted)    // the settlement landed
		is.True(!strings.Contains(body, "Nothing changed")) // the page must not say nothing changed
		is.Equal(code, http.StatusOK)                       // nor answer as if it could not be done
	})
}
