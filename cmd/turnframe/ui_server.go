package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
)

// uiFiles are the page's templates, its style sheet and its refresh script.
//
//go:embed ui
var uiFiles embed.FS

// uiOptions are how the ui command serves.
type uiOptions struct {
	readOnly bool            // serve no write route and draw no button
	loopback bool            // answer only requests addressed to a loopback host name
	hosts    hostRule        // off loopback: answer only requests addressed to these
	refresh  time.Duration   // how often a page reloads itself; 0 never
	actor    turnframe.Actor // who the page's writes name in the history
}

// uiServer serves the operator page on one open store. Its token is drawn
// once per run and is the secret every write must carry.
type uiServer struct {
	store opStore
	db    *dbFlags
	file  fs.FileInfo // the SQLite file at --db when the page started; nil on PostgreSQL
	e     *env
	opts  uiOptions
	token string
	pages *template.Template
}

// newUIServer draws the run's token and parses the embedded templates.
func newUIServer(store opStore, db *dbFlags, e *env, opts uiOptions) (*uiServer, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("draw the write token: %w", err)
	}
	file, err := servedFile(db.path)
	if err != nil {
		return nil, err
	}
	s := &uiServer{store: store, db: db, e: e, opts: opts, token: hex.EncodeToString(b), file: file}
	pages, err := template.New("").Funcs(template.FuncMap{
		"stamp":    stamp,
		"text":     shown,
		"payload":  pagePayload,
		"token":    func() string { return s.token },
		"readonly": func() bool { return s.opts.readOnly },
		"statuses": func() []turnframe.OutboxStatus { return outboxStatuses() },
	}).ParseFS(uiFiles, "ui/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse the page templates: %w", err)
	}
	s.pages = pages
	return s, nil
}

// shown is text an application, a remote or a file supplied as the page
// draws it: as it is when every rune is printable and drawn visibly
// (drawnBlank), else escaped as the
// CLI's tables escape it (cell), so a control or format character — a
// terminal's escape, a bidi override that reverses what follows, a
// zero-width space that disguises one actor as another — is shown as its
// escape and never reaches the browser to act. html/template then escapes
// it for HTML. "" stays empty. A form's hidden field keeps the exact text
// it posts back, which the browser never shows.
func shown(s string) string {
	if s == "" {
		return ""
	}
	return cell(s)
}

// uiPayload is a payload as the page shows it: its beginning, and what says
// it was cut (payloadPreview).
type uiPayload struct{ Shown, Note string }

// pagePayload is the page's payloadPreview of a view's payload, given as
// its text or its base64 form.
func pagePayload(text, b64 string) uiPayload {
	size := len(text)
	if b64 != "" {
		size = base64.StdEncoding.DecodedLen(len(b64)) - strings.Count(b64[max(0, len(b64)-2):], "=")
	}
	shown, note := payloadPreview(text, b64, size)
	return uiPayload{shown, note}
}

// handler routes the page's requests. Read-only, the write routes do not
// exist: a POST to one is answered 405 by the mux, which holds only GETs.
func (s *uiServer) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(uiFiles, "ui/static") // a constant path into the embedded tree
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.read(s.overview))
	mux.HandleFunc("GET /outbox", s.read(s.outboxPage))
	mux.HandleFunc("GET /turns", s.read(s.turnsPage))
	mux.HandleFunc("GET /id/{id}", s.read(s.idPage))
	mux.HandleFunc("GET /entry", s.read(s.entryPage))
	mux.HandleFunc("GET /", s.read(func(*http.Request) (string, any, error) {
		return "", nil, fmt.Errorf("no such page: %w", turnframe.ErrNotFound)
	}))
	if !s.opts.readOnly {
		mux.HandleFunc("POST /settle", s.write(s.settle))
		mux.HandleFunc("POST /requeue", s.write(s.requeue))
		mux.HandleFunc("POST /approve", s.write(s.approval(true)))
		mux.HandleFunc("POST /deny", s.write(s.approval(false)))
	}
	return s.guard(mux)
}

// uiPage is what every template gets: the page's own data in Data, and
// what the layout needs.
type uiPage struct {
	Title    string
	ReadOnly bool
	Token    string
	Refresh  int // seconds; 0: the page does not reload itself
	Actor    string
	Flash    *uiFlash
	Data     any
}

// uiFlash is the status line above a page: the outcome of a write, or why
// a request could not be served.
type uiFlash struct {
	OK      bool
	Message string
}

// read serves a GET: once the database's file and schema are checked
// (checkFile, checkSchema), fn returns the template to draw and its data,
// or an error the page explains.
func (s *uiServer) read(fn func(*http.Request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkDB(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		name, data, err := fn(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, http.StatusOK, name, uiPage{Refresh: refreshSeconds(s.opts.refresh), Data: data})
	}
}

// maxRefreshSeconds is the longest reload delay the page asks for: browsers
// keep a timer's delay as a 32-bit count of milliseconds, and one past it
// (about 24.8 days) wraps and fires at once, so the page would reload
// without end.
const maxRefreshSeconds = (1<<31 - 1) / 1000

// refreshSeconds is the delay, in whole seconds, a page drawn under
// --refresh d reloads after: 0 (never) for 0, else d rounded up to a
// second (a delay under one is not taken for never) and at most
// maxRefreshSeconds.
func refreshSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	secs := d / time.Second
	if d%time.Second != 0 {
		secs++
	}
	return int(min(secs, maxRefreshSeconds))
}

// uiResult is a write's page: what it did, and where to go back to.
type uiResult struct {
	Back string
}

// render draws template name with p into a buffer first, so that a
// template error is answered whole, as a 500 without a half-written page.
func (s *uiServer) render(w http.ResponseWriter, code int, name string, p uiPage) {
	p.ReadOnly, p.Token, p.Actor = s.opts.readOnly, s.token, string(s.opts.actor)
	if p.Title == "" {
		p.Title = "turnframe · " + s.store.Name()
	}
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, p); err != nil {
		fmt.Fprintf(s.e.stderr, "turnframe ui: draw %s: %v\n", name, err)
		http.Error(w, "the page could not be drawn; the error is in the ui command's output", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// fail answers a request that could not be served with a page that says
// why, under the status the error calls for (uiStatus); the result page
// does not reload itself.
func (s *uiServer) fail(w http.ResponseWriter, r *http.Request, err error) {
	err = s.e.explain(err) // a server's errors worded, its password never shown
	code := uiStatus(err)
	if code == http.StatusInternalServerError || deniedByServer(err) {
		// Logged for whoever started the page: a 500 is a fault to look
		// into, and a role the server refuses is one only they can change.
		// The path is the requester's (any page the browser shows may send
		// one), decoded: quoted when it holds what a terminal would act on.
		fmt.Fprintf(s.e.stderr, "turnframe ui: %s %s: %v\n", r.Method, cell(r.URL.Path), err)
	}
	s.render(w, code, "result.html", uiPage{Flash: &uiFlash{Message: uiMessage(code, err, r.Method == http.MethodPost)}, Data: uiResult{Back: backPath(r)}})
}

// uiStatus is the HTTP status of an error: 400 for a bad id or value, 404
// for one that names nothing, 409 for a move the store's rule refused (the
// row or entry moved since the page was drawn), 503 for a database that
// stayed locked, whose schema is no longer this build's or whose file is
// no longer the one the page opened, 403 for a refused write and for a
// login or privilege the PostgreSQL server refuses the page's role (the
// request was fine, and sending it again cannot succeed: the page must run
// as another role); 500 for the rest.
func uiStatus(err error) int {
	var u *usageError
	var refused *uiRefusal
	var moved *schemaMovedError
	var gone *fileMovedError
	switch {
	case errors.As(err, &refused), deniedByServer(err):
		return http.StatusForbidden
	case errors.As(err, &moved), errors.As(err, &gone):
		return http.StatusServiceUnavailable
	case errors.As(err, &u), errors.Is(err, turnframe.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, turnframe.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, turnframe.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, turnframe.ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// deniedByServer reports whether err is the PostgreSQL server refusing the
// login or a privilege of the role the page runs as (describeServer).
func deniedByServer(err error) bool {
	var oe *openError
	return errors.As(err, &oe) && oe.denied
}

// uiMessage words an error for the status line; a write's says that
// nothing changed.
func uiMessage(code int, err error, write bool) string {
	nothing := ""
	if write {
		nothing = "Nothing changed: "
	}
	if moved := (*schemaMovedError)(nil); errors.As(err, &moved) {
		return nothing + moved.Error() + "."
	}
	if gone := (*fileMovedError)(nil); errors.As(err, &gone) {
		return nothing + gone.Error() + "."
	}
	switch code {
	case http.StatusConflict:
		return nothing + "it moved since this page was drawn. Reload the page and look again. (" + err.Error() + ")"
	case http.StatusServiceUnavailable:
		return nothing + "the database is busy. Try again in a moment. (" + err.Error() + ")"
	case http.StatusForbidden:
		if deniedByServer(err) {
			return nothing + err.Error()
		}
		return "Refused, nothing changed: " + err.Error()
	case http.StatusInternalServerError:
		return "Could not be done: " + err.Error()
	}
	return nothing + err.Error()
}

// backPath is where a result page links back to: the page the form was on
// (its Referer, when it is this server's), else the overview.
func backPath(r *http.Request) string {
	ref, err := url.Parse(r.Referer())
	if err != nil || ref.Host != r.Host || (ref.Scheme != "http" && ref.Scheme != "https") {
		return "/"
	}
	return ref.RequestURI()
}
