package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The ui command logs a request it could not serve (a 500) to the
// operator's terminal with the request's path. The path is the requester's:
// any web page the operator's browser shows can send a request to the
// loopback page (its Host is the loopback address, which the page answers
// to) and break it off while it is read, which ends its context and makes
// it a 500. Its decoded path may hold an escape sequence or a newline; the
// log line must show it quoted, never raw, so no request can clear the
// operator's screen, retitle the terminal or forge a log line.
func TestTheUILogsARequestsPathEscaped(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	var stderr bytes.Buffer
	e := &env{stdout: &bytes.Buffer{}, stderr: &stderr, now: time.Now}
	s, err := newUIServer(sqliteOps{openFixture(t, f)}, &dbFlags{path: f.path, busy: 50 * time.Millisecond}, e,
		uiOptions{loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the requester broke the connection off
	const hostile = "/%1b]0;pwned%07%1b[2J%0aturnframe%20ui:%20forged"
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+hostile, nil).WithContext(ctx)
	req.Host = "127.0.0.1:8080"
	rec := httptest.NewRecorder()
	s.handler().ServeHTTP(rec, req)

	logged := stderr.String()
	is.True(logged != "")                             // the failed request was logged
	is.True(!strings.ContainsAny(logged, "\x1b\x07")) // no escape sequence reaches the terminal raw
	is.Equal(strings.Count(logged, "\n"), 1)          // one line: the path's newline forges none
}
