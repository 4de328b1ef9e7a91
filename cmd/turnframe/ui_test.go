package main

import (
	"bytes"
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// testUI serves the page on a fixture's file, as 'turnframe ui' would.
type testUI struct {
	t     *testing.T
	srv   *httptest.Server
	ui    *uiServer
	store *sqlitestore.Store
}

// newTestUI serves the fixture's file through a store of its own, with
// small pages so that paging shows.
func newTestUI(t *testing.T, f fixture, readOnly bool) *testUI {
	t.Helper()
	store := openFixture(t, f)
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	db := &dbFlags{path: f.path, busy: 50 * time.Millisecond}
	s, err := newUIServer(sqliteOps{store}, db, e, uiOptions{readOnly: readOnly, loopback: true, refresh: 15 * time.Second, actor: turnframe.ActorOperator})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	return &testUI{t: t, srv: srv, ui: s, store: store}
}

// get returns the status and body of a GET of path.
func (u *testUI) get(path string) (int, string) {
	u.t.Helper()
	res, err := http.Get(u.srv.URL + path)
	if err != nil {
		u.t.Fatal(err)
	}
	return readResponse(u.t, res)
}

// post sends form to path with the headers a browser on the page sends,
// changed by edit (which may be nil), and returns the status and body.
func (u *testUI) post(path string, form url.Values, edit func(*http.Request)) (int, string) {
	u.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		u.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.srv.URL)
	req.Header.Set("Referer", u.srv.URL+"/")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	return readResponse(u.t, res)
}

func readResponse(t *testing.T, res *http.Response) (int, string) {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

var tokenField = regexp.MustCompile(`name="token" value="([0-9a-f]{64})"`)

// pageToken is the token the overview's forms carry.
func (u *testUI) pageToken() string {
	u.t.Helper()
	_, body := u.get("/")
	m := tokenField.FindStringSubmatch(body)
	if m == nil {
		u.t.Fatal("the overview has no form with a token")
	}
	return m[1]
}

// settleForm is the form of a row's settle button.
func settleForm(token string, id turnframe.OutboxID, verdict, note string) url.Values {
	return url.Values{"token": {token}, "kind": {"row"}, "id": {id.String()}, "verdict": {verdict}, "note": {note}}
}

func (u *testUI) status(id turnframe.OutboxID) turnframe.OutboxStatus {
	u.t.Helper()
	rec, err := u.store.GetOutbox(context.Background(), id)
	if err != nil {
		u.t.Fatal(err)
	}
	return rec.Status
}

func TestUIPages(t *testing.T) {
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	t.Run("TheOverviewShowsWhatNeedsAPersonFirstWithItsButtons", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/")
		is.Equal(code, http.StatusOK)
		unknown, counts := strings.Index(body, `id="unknown"`), strings.Index(body, `id="counts"`)
		is.True(unknown > 0 && counts > unknown)                                            // uncertain rows come before the counts
		is.True(strings.Contains(body, `id="settle-`+f.unknown.String()+`"`))               // the unknown row has a settle form
		is.True(strings.Contains(body, `id="escalate-`+f.unknown.String()+`"`))             // and an escalate button
		is.True(strings.Contains(body, `id="requeue-`+f.failed.String()+`"`))               // a failed row can be requeued
		is.True(strings.Contains(body, "key-ask-remote"))                                   // the unknown journal entry is listed
		is.True(strings.Contains(body, `id="destinations"`))                                // counts by destination
		is.True(strings.Contains(body, "<td>hang</td>"))                                    // the unknown row's destination is counted
		is.True(strings.Contains(body, `data-refresh="15"`))                                // it reloads itself
		is.True(strings.Count(body, `value="`+u.ui.token+`"`) >= 3)                         // every form carries the run's token
		is.Equal(u.pageToken(), u.ui.token)                                                 // the token is the run's
		is.True(!strings.Contains(body, "<script>"))                                        // no inline script
		is.True(strings.Contains(body, `<script src="/static/refresh.js" defer></script>`)) // the refresh script is served
	})
	t.Run("TheAssetsAreEmbedded", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/static/style.css")
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "#flash"))
		code, body = u.get("/static/refresh.js")
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "location.reload"))
	})
	t.Run("TheOutboxListingIsPaged", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/outbox")
		is.Equal(code, http.StatusOK)
		is.Equal(strings.Count(body, `<tr><td><a href="/id/`), 3) // one page of three rows
		m := regexp.MustCompile(`after=([0-9A-Z]{26})" id="next"`).FindStringSubmatch(body)
		is.True(m != nil) // a link to the next page
		code, next := u.get("/outbox?after=" + m[1])
		is.Equal(code, http.StatusOK)
		is.True(!strings.Contains(next, `href="/id/`+m[1]+`"`)) // the next page starts after the cursor
		code, failed := u.get("/outbox?status=failed")
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(failed, f.failed.String())) // a status keeps its rows
		is.True(!strings.Contains(failed, f.unknown.String()))
	})
	t.Run("UnfinishedTurnsShowRecoverysDecision", func(t *testing.T) {
		is := is.New(t)
		next := regexp.MustCompile(`href="/turns\?after=([0-9A-Z]{26})" id="next"`)
		row := regexp.MustCompile(`<a href="/id/` + f.planned.String() + `">[^\n]*<td class="decision">([a-z_]+)</td>`)
		path, decision := "/turns", ""
		for pages := 0; decision == "" && path != "" && pages < 10; pages++ {
			code, body := u.get(path)
			is.Equal(code, http.StatusOK)
			if m := row.FindStringSubmatch(body); m != nil {
				decision = m[1]
			}
			path = ""
			if m := next.FindStringSubmatch(body); m != nil {
				path = "/turns?after=" + m[1]
			}
		}
		is.Equal(decision, "resume_commands") // the planned turn, found by paging, with what recovery does for it
	})
	t.Run("ARowsPageShowsItsHistory", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/id/" + f.unknown.String())
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, `id="status" class="st-outcome_unknown"`))
		is.True(strings.Contains(body, `id="history"`))
		is.True(strings.Contains(body, "dispatching → outcome_unknown")) // the move that made it unknown
		is.True(strings.Contains(body, "<code>"+fixtureTrace+"</code>")) // the trace it was enqueued under
	})
	t.Run("ATurnsPageShowsItsJournalAndDecision", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/id/" + f.planned.String())
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "Turn "+f.planned.String()))
		is.True(strings.Contains(body, "key-pending-one"))
		is.True(strings.Contains(body, "resume_commands"))
	})
	t.Run("AnEntrysPageShowsItsHistory", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/entry?account=acme&key=key-ask-remote")
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "Journal entry key-ask-remote"))
		is.True(strings.Contains(body, "outcome_unknown"))
	})
	for _, c := range []struct {
		name, path string
		code       int
	}{
		{"ABadIDIs400", "/id/not-an-id", http.StatusBadRequest},
		{"AnIDOfNothingIs404", "/id/01J9Z3AAAAAAAAAAAAAAAAAAAA", http.StatusNotFound},
		{"AMissingEntryIs404", "/entry?account=acme&key=nope", http.StatusNotFound},
		{"ABadCursorIs400", "/outbox?after=x", http.StatusBadRequest},
		{"AnUnknownPageIs404", "/nothing-here", http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			code, body := u.get(c.path)
			is.Equal(code, c.code)
			is.True(strings.Contains(body, `<p id="flash" class="err"`)) // the page says what went wrong
			is.True(!strings.Contains(body, "goroutine"))                // never a stack
		})
	}
	t.Run("AnotherHostNameIsRefused", func(t *testing.T) {
		is := is.New(t)
		req, err := http.NewRequest(http.MethodGet, u.srv.URL+"/", nil)
		is.NoErr(err)
		req.Host = "rebound.example:80" // a DNS-rebinding page's name
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		code, _ := readResponse(t, res)
		is.Equal(code, http.StatusMisdirectedRequest)
	})
}

func TestUISettle(t *testing.T) {
	t.Run("MovesTheRowExactlyAsTheSettleCommandDoes", func(t *testing.T) {
		is := is.New(t)
		byCLI, byPage := mustFixture(t), mustFixture(t)
		code, _, stderr := cli(t, "settle", "--db", byCLI.path, byCLI.unknown.String(), "completed", "--note", "checked the remote")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)

		u := newTestUI(t, byPage, false)
		code, body := u.post("/settle", settleForm(u.pageToken(), byPage.unknown, "completed", "checked the remote"), nil)
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, `<p id="flash" class="ok"`))
		is.True(strings.Contains(body, "outcome_unknown → completed by operator (code operator.completed)")) // the command's own line

		ctx := context.Background()
		want, err := openFixture(t, byCLI).GetOutbox(ctx, byCLI.unknown)
		is.NoErr(err)
		got, err := u.store.GetOutbox(ctx, byPage.unknown)
		is.NoErr(err)
		is.Equal(got.Status, turnframe.OutboxCompleted)
		is.Equal(got.Status, want.Status)
		is.Equal(got.LastCode, want.LastCode)
		is.Equal(got.RemoteRef, want.RemoteRef)
		wantRec := lastRecord(t, openFixture(t, byCLI), turnframe.OutboxSubject(fixtureAccount, byCLI.unknown))
		gotRec := lastRecord(t, u.store, turnframe.OutboxSubject(fixtureAccount, byPage.unknown))
		is.Equal(gotRec.Actor, turnframe.ActorOperator) // the page writes as the operator
		is.Equal(gotRec.Note, "checked the remote")
		is.Equal([]string{gotRec.From, gotRec.To, string(gotRec.Actor), gotRec.Code, gotRec.Note},
			[]string{wantRec.From, wantRec.To, string(wantRec.Actor), wantRec.Code, wantRec.Note}) // the same audit record
	})
	t.Run("AJournalEntryIsSettledAndEscalated", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		u := newTestUI(t, f, false)
		form := url.Values{"token": {u.pageToken()}, "kind": {"entry"}, "account": {"acme"}, "key": {"key-ask-remote"}, "verdict": {"escalate"}}
		code, body := u.post("/settle", form, nil)
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "outcome_unknown → needs_intervention by operator"))
		e, err := u.store.ByKey(context.Background(), "acme", "key-ask-remote")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalNeedsIntervention)
	})
	t.Run("AStaleFormIs409AndChangesNothing", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		u := newTestUI(t, f, false)
		token := u.pageToken()
		code, _ := u.post("/settle", settleForm(token, f.unknown, "failed", ""), nil)
		is.Equal(code, http.StatusOK) // the first click settles it
		code, body := u.post("/settle", settleForm(token, f.unknown, "completed", ""), nil)
		is.Equal(code, http.StatusConflict) // the second form was drawn before the row moved
		is.True(strings.Contains(body, "moved since this page was drawn"))
		is.Equal(u.status(f.unknown), turnframe.OutboxFailed) // unchanged by the stale form
		// The failed row's requeue form, at the attempt the page shows.
		requeue := url.Values{"token": {token}, "id": {f.unknown.String()}, "attempts": {"1"}}
		code, body = u.post("/requeue", requeue, nil)
		is.Equal(code, http.StatusOK) // the failed row is requeued
		is.True(strings.Contains(body, "→ pending"))
		is.Equal(u.status(f.unknown), turnframe.OutboxPending)
		code, _ = u.post("/requeue", requeue, nil)
		is.Equal(code, http.StatusConflict) // a pending row cannot be requeued
	})
	t.Run("ABadFormIs400", func(t *testing.T) {
		f := mustFixture(t)
		u := newTestUI(t, f, false)
		token := u.pageToken()
		nowhere, err := turnframe.ParseOutboxID("01J9Z3AAAAAAAAAAAAAAAAAAAA")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			form url.Values
			code int
			says string
		}{
			{"NotAnID", settleForm(token, f.unknown, "completed", ""), http.StatusBadRequest, "is not an id"},
			{"NotAVerdict", settleForm(token, f.unknown, "maybe", ""), http.StatusBadRequest, "is not a verdict"},
			{"NoKind", url.Values{"token": {token}, "id": {f.unknown.String()}, "verdict": {"completed"}}, http.StatusBadRequest, "neither a row nor"},
			{"NoSuchRow", settleForm(token, nowhere, "completed", ""), http.StatusNotFound, "no outbox row"},
		} {
			t.Run(c.name, func(t *testing.T) {
				is := is.New(t)
				if c.name == "NotAnID" {
					c.form.Set("id", "row-7")
				}
				code, body := u.post("/settle", c.form, nil)
				is.Equal(code, c.code)
				is.True(strings.Contains(body, c.says)) // the status line says what is wrong
				is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown)
			})
		}
	})
	t.Run("ABusyFileIs503AndChangesNothing", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		u := newTestUI(t, f, false)
		token := u.pageToken()
		ctx := context.Background()
		app, err := sqlitestore.Open(ctx, f.path, sqlitestore.WithExisting())
		is.NoErr(err)
		defer app.Close()
		tx, err := app.BeginTx(ctx) // an application holding the write lock
		is.NoErr(err)
		_, err = tx.ExecContext(ctx, "UPDATE turns SET updated_at = updated_at WHERE id = ?", f.delivered.String())
		is.NoErr(err)
		code, body := u.post("/settle", settleForm(token, f.unknown, "completed", ""), nil)
		is.NoErr(tx.Rollback())
		is.Equal(code, http.StatusServiceUnavailable)
		is.True(strings.Contains(body, "the database is busy"))
		is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown)
		code, _ = u.post("/settle", settleForm(token, f.unknown, "completed", ""), nil)
		is.Equal(code, http.StatusOK) // once the lock is gone, the same form goes through
	})
}

func TestUIGuard(t *testing.T) {
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	token := u.pageToken()
	for _, c := range []struct {
		name string
		form url.Values
		edit func(*http.Request)
	}{
		{"NoToken", settleForm("", f.unknown, "completed", ""), nil},
		{"AWrongToken", settleForm(strings.Repeat("0", 64), f.unknown, "completed", ""), nil},
		{"AnotherOrigin", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }},
		{"AnotherSite", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }},
		{"AnotherPortOfLocalhost", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:1") }},
		{"ANullOrigin", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) { r.Header.Set("Origin", "null") }},
		{"AReferrerFromElsewhere", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) {
			r.Header.Del("Origin")
			r.Header.Set("Referer", "http://evil.example/page")
		}},
		{"NeitherOriginNorReferer", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) {
			r.Header.Del("Origin")
			r.Header.Del("Referer")
		}},
	} {
		t.Run("Refuses"+c.name, func(t *testing.T) {
			is := is.New(t)
			code, body := u.post("/settle", c.form, c.edit)
			is.Equal(code, http.StatusForbidden)
			is.True(strings.Contains(body, "Refused, nothing changed"))
			is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown) // unchanged
		})
	}
	t.Run("AcceptsASameOriginRefererWithoutOrigin", func(t *testing.T) {
		is := is.New(t)
		code, _ := u.post("/settle", settleForm(token, f.unknown, "completed", ""), func(r *http.Request) {
			r.Header.Del("Origin")
			r.Header.Del("Sec-Fetch-Site")
		})
		is.Equal(code, http.StatusOK)
		is.Equal(u.status(f.unknown), turnframe.OutboxCompleted)
	})
	t.Run("EveryAnswerForbidsFraming", func(t *testing.T) {
		is := is.New(t)
		res, err := http.Get(u.srv.URL + "/")
		is.NoErr(err)
		res.Body.Close()
		is.Equal(res.Header.Get("X-Frame-Options"), "DENY")
		is.True(strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'"))
	})
}

func TestUIReadOnly(t *testing.T) {
	f := mustFixture(t)
	u := newTestUI(t, f, true)
	t.Run("DrawsNoButton", func(t *testing.T) {
		is := is.New(t)
		code, body := u.get("/")
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, f.unknown.String())) // the row is shown
		is.True(!strings.Contains(body, "<form"))           // with no form
		is.True(!strings.Contains(body, u.ui.token))        // and no token
	})
	for _, path := range []string{"/settle", "/requeue", "/approve", "/deny"} {
		t.Run("ServesNoWrite"+path, func(t *testing.T) {
			is := is.New(t)
			code, _ := u.post(path, settleForm(u.ui.token, f.unknown, "completed", ""), nil)
			is.True(code == http.StatusNotFound || code == http.StatusMethodNotAllowed) // no such route
			is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown)
		})
	}
}

// lineWriter collects what a command writes while it runs, and hands each
// complete line to lines as it comes.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		line, rest, ok := bytes.Cut(w.buf, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		w.lines <- string(line)
		w.buf = rest
	}
}

func TestUICommand(t *testing.T) {
	f := mustFixture(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		t.Run("RefusesANonLoopbackAddr_"+addr, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, "ui", "--db", f.path, "--addr", addr)
			is.Equal(code, exitUsage)
			is.True(strings.Contains(stderr, "--allow-remote")) // it says how to ask for it
		})
	}
	t.Run("RefusesAnActorOfTurnframesOwn", func(t *testing.T) {
		is := is.New(t)
		code, _, _ := cli(t, "ui", "--db", f.path, "--actor", "recovery")
		is.Equal(code, exitUsage)
	})
	t.Run("ServesOnLoopbackUntilItsContextEnds", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &lineWriter{lines: make(chan string, 8)}
		exit := make(chan int, 1)
		go func() { exit <- run(ctx, []string{"ui", "--db", f.path, "--read-only"}, out, io.Discard) }()
		line := <-out.lines
		m := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/) \(read-only\)`).FindStringSubmatch(line)
		is.True(m != nil) // it prints its URL, on loopback
		res, err := http.Get(m[1])
		is.NoErr(err)
		code, body := readResponse(t, res)
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, f.unknown.String())) // the page shows the file
		cancel()
		is.Equal(<-exit, exitOK)                       // Ctrl-C ends it cleanly
		is.Equal(<-out.lines, "turnframe ui: stopped") // after shutting the server down
		_, err = http.Get(m[1])
		is.True(err != nil) // nothing listens any more
	})
}

// awaitingApproval adds to the fixture's file a turn that planned two
// commands needing approval, under the keys pay-1 and pay-2.
func awaitingApproval(t *testing.T, store turnframe.Store) {
	t.Helper()
	ctx := context.Background()
	rt := turnframe.New(store)
	turn, err := rt.Receive(ctx, fixtureAccount, rt.NewConversationID(), "pay both invoices")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Plan(ctx, fixtureAccount, turn, turnframe.Plan{Commands: []turnframe.Command{
		{Key: "pay-1", Case: "invoice/1", Name: "pay", NeedsApproval: true},
		{Key: "pay-2", Case: "invoice/2", Name: "pay", NeedsApproval: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUIApproval(t *testing.T) {
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	awaitingApproval(t, u.store)
	entry := func(key string) turnframe.JournalEntry {
		t.Helper()
		e, err := u.store.ByKey(context.Background(), fixtureAccount, turnframe.IdempotencyKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Run("TheOverviewOffersApproveAndDeny", func(t *testing.T) {
		is := is.New(t)
		_, body := u.get("/")
		approvals := body[strings.Index(body, `id="approvals"`):strings.Index(body, `id="counts"`)]
		is.True(strings.Contains(approvals, "pay-1"))
		is.True(strings.Contains(approvals, `action="/approve"`))
		is.True(strings.Contains(approvals, `action="/deny"`))
	})
	t.Run("ApproveAndDenyMoveTheEntriesAsTheCommandsDo", func(t *testing.T) {
		is := is.New(t)
		token := u.pageToken()
		code, body := u.post("/approve", url.Values{"token": {token}, "account": {"acme"}, "key": {"pay-1"}, "note": {"ok by finance"}}, nil)
		is.Equal(code, http.StatusOK)
		is.True(strings.Contains(body, "awaiting_approval → pending by operator"))
		is.Equal(entry("pay-1").Status, turnframe.JournalPending)
		code, _ = u.post("/deny", url.Values{"token": {token}, "account": {"acme"}, "key": {"pay-2"}}, nil)
		is.Equal(code, http.StatusOK)
		is.Equal(entry("pay-2").Status, turnframe.JournalRejected)
		last := lastRecord(t, u.store, turnframe.JournalSubject(fixtureAccount, "pay-1"))
		is.Equal(last.Actor, turnframe.ActorOperator)
		is.Equal(last.Note, "ok by finance")
		code, body = u.post("/deny", url.Values{"token": {token}, "account": {"acme"}, "key": {"pay-1"}}, nil)
		is.Equal(code, http.StatusConflict) // approved since the form was drawn
		is.True(strings.Contains(body, "moved since this page was drawn"))
		is.Equal(entry("pay-1").Status, turnframe.JournalPending) // unchanged
	})
}

// follow resolves href, as a browser does, against the page it was on.
func follow(t *testing.T, page, href string) string {
	t.Helper()
	base, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(html.UnescapeString(href))
	if err != nil {
		t.Fatal(err)
	}
	return base.ResolveReference(ref).RequestURI()
}

// A journal entry's page lists its history a page at a time; its "more
// history" link leads to the next page of the same entry's history, its
// account and key kept.
func TestAnEntrysMoreHistoryLinkKeepsTheEntry(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, false) // three records a page
	code, _ := u.post("/settle", url.Values{"token": {u.pageToken()}, "kind": {"entry"}, "account": {"acme"},
		"key": {"key-ask-remote"}, "verdict": {"escalate"}}, nil)
	is.Equal(code, http.StatusOK) // a fourth record

	page := "/entry?account=acme&key=key-ask-remote"
	code, body := u.get(page)
	is.Equal(code, http.StatusOK)
	m := regexp.MustCompile(`<a href="([^"]*)">more history</a>`).FindStringSubmatch(body)
	is.True(m != nil) // the entry has more history than one page
	code, body = u.get(follow(t, page, m[1]))
	is.Equal(code, http.StatusOK)                                           // the next page of the entry's history
	is.True(strings.Contains(body, "Journal entry key-ask-remote"))         // of the same entry
	is.True(strings.Contains(body, "outcome_unknown → needs_intervention")) // with its fourth record
}

// The page served on a non-loopback address ('ui --addr 10.0.0.5:8080
// --allow-remote') answers only to the host it was told to serve on: a
// hostile site whose name its DNS rebinds to that address is not
// same-origin with it, so it can neither read a page (and the token on it)
// nor post a write whose Origin is its own name.
func TestARemotePageRefusesARebindingHostName(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	s, err := newUIServer(sqliteOps{store}, &dbFlags{path: f.path, busy: 50 * time.Millisecond}, e,
		uiOptions{loopback: false, actor: turnframe.ActorOperator})
	is.NoErr(err)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	const rebound = "rebound.evil.example:8080" // the attacker's name, now resolving to the page's address

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/id/"+f.unknown.String(), nil)
	is.NoErr(err)
	req.Host = rebound
	res, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	code, body := readResponse(t, res)
	is.Equal(code, http.StatusMisdirectedRequest) // a host name the page was not served under is refused
	is.True(!tokenField.MatchString(body))        // no token to read
	is.True(!strings.Contains(body, "cents"))     // nor a payload

	form := settleForm(s.token, f.unknown, "completed", "")
	req, err = http.NewRequest(http.MethodPost, srv.URL+"/settle", strings.NewReader(form.Encode()))
	is.NoErr(err)
	req.Host = rebound
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+rebound)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	code, _ = readResponse(t, res)
	is.Equal(code, http.StatusMisdirectedRequest) // the write is refused
	rec, err := store.GetOutbox(context.Background(), f.unknown)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // and nothing written
}

// Off loopback, the page answers to the host --addr named: its IP; a host
// name it gives, and the IP that name was bound to; for an --addr of every
// interface, any IP address or localhost. Never to another host name.
func TestARemotePageAnswersToTheHostItServesOn(t *testing.T) {
	for _, c := range []struct {
		addr    string
		bound   string // the IP the listener was bound to
		allowed []string
		refused []string
	}{
		{"10.0.0.5:8080", "10.0.0.5", []string{"10.0.0.5:8080", "10.0.0.5"}, []string{"rebound.evil.example:8080", "10.0.0.6:8080", "localhost:8080", ""}},
		{"ops.internal:8080", "10.0.0.9", []string{"ops.internal:8080", "OPS.Internal:8080", "10.0.0.9:8080"}, []string{"rebound.evil.example:8080", "10.0.0.5:8080", "ops.internal.evil.example:8080"}},
		{"[fd00::5]:8080", "fd00::5", []string{"[fd00::5]:8080", "[fd00:0::5]:8080"}, []string{"[fd00::6]:8080", "rebound.evil.example"}},
		{":8080", "::", []string{"192.168.1.7:8080", "[fd00::5]:8080", "localhost:8080", "127.0.0.1:8080"}, []string{"rebound.evil.example:8080", "ops.internal:8080"}},
		{"0.0.0.0:8080", "0.0.0.0", []string{"192.168.1.7:8080"}, []string{"rebound.evil.example:8080"}},
	} {
		t.Run(c.addr, func(t *testing.T) {
			is := is.New(t)
			h := remoteHosts(c.addr)
			h.bind(&net.TCPAddr{IP: net.ParseIP(c.bound), Port: 8080}) // as serveUI does once it listens
			for _, host := range c.allowed {
				is.True(h.allows(host)) // the page's own host
			}
			for _, host := range c.refused {
				is.True(!h.allows(host)) // another host
			}
		})
	}
	t.Run("ThePageAndItsWritesThroughItsOwnAddress", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		store := openFixture(t, f)
		e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
		s, err := newUIServer(sqliteOps{store}, &dbFlags{path: f.path, busy: 50 * time.Millisecond}, e,
			uiOptions{hosts: remoteHosts("10.0.0.5:8080"), actor: turnframe.ActorOperator})
		is.NoErr(err)
		srv := httptest.NewServer(s.handler())
		defer srv.Close()
		u := &testUI{t: t, srv: srv, ui: s, store: store}
		const self = "10.0.0.5:8080" // the Host a browser at http://10.0.0.5:8080/ sends
		addressed := func(r *http.Request) {
			r.Host = self
			r.Header.Set("Origin", "http://"+self)
		}
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		is.NoErr(err)
		req.Host = self
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		code, _ := readResponse(t, res)
		is.Equal(code, http.StatusOK) // the page is served under its own address
		code, _ = u.post("/settle", settleForm(s.token, f.unknown, "completed", ""), addressed)
		is.Equal(code, http.StatusOK) // and its forms write
		is.Equal(u.status(f.unknown), turnframe.OutboxCompleted)
	})
}
