package main

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

var refreshAttr = regexp.MustCompile(`data-refresh="(\d+)"`)

// The page's script reloads it with setInterval, whose delay browsers keep
// as a 32-bit count of milliseconds: past about 24.8 days it wraps, and
// the page reloaded at once, again and again, each time reading the
// database (an operator's --refresh 1000h, meaning "hardly ever"). A
// --refresh under a second was drawn as 0, which the script reads as
// never. The page now asks for at least one second and at most what a
// browser's timer holds; 0 is still never.
func TestTheRefreshThePageAsksForIsOneABrowserKeeps(t *testing.T) {
	for _, c := range []struct {
		name    string
		refresh time.Duration
		want    func(seconds int) bool
	}{
		{"AThousandHoursIsTheLongestATimerHolds", 1000 * time.Hour, func(s int) bool { return s > 0 && s*1000 <= 1<<31-1 }},
		{"TheLongestDurationIsTheLongestATimerHolds", time.Duration(math.MaxInt64), func(s int) bool { return s > 0 && s*1000 <= 1<<31-1 }},
		{"HalfASecondIsASecond", 500 * time.Millisecond, func(s int) bool { return s == 1 }},
		{"FifteenSecondsIsFifteen", 15 * time.Second, func(s int) bool { return s == 15 }},
		{"ZeroIsNever", 0, func(s int) bool { return s == 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := mustFixture(t)
			e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
			s, err := newUIServer(sqliteOps{openFixture(t, f)}, &dbFlags{path: f.path, busy: time.Second}, e,
				uiOptions{loopback: true, refresh: c.refresh, actor: turnframe.ActorOperator})
			is.NoErr(err)
			srv := httptest.NewServer(s.handler())
			t.Cleanup(srv.Close)
			u := &testUI{t: t, srv: srv, ui: s}
			code, body := u.get("/")
			is.Equal(code, http.StatusOK)
			m := refreshAttr.FindStringSubmatch(body)
			is.True(m != nil) // the page says how often it reloads
			seconds, err := strconv.Atoi(m[1])
			is.NoErr(err)
			t.Logf("--refresh %v: data-refresh=%d", c.refresh, seconds)
			is.True(c.want(seconds)) // a delay the browser keeps
		})
	}
}
