package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// cliPaged runs the command line as cli does, with listings reading page
// rows at a time.
func cliPaged(t *testing.T, page int, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runEnv(context.Background(), &env{stdout: &out, stderr: &errb, now: time.Now, page: page}, args)
	return code, out.String(), errb.String()
}

// firstColumn returns the first cell of every line of a table but its
// header.
func firstColumn(table string) []string {
	var ids []string
	for i, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if i > 0 {
			ids = append(ids, strings.Fields(line)[0])
		}
	}
	return ids
}

var moreLine = regexp.MustCompile(`more: .* --after (\S+)'`)

// TestListingsPage reads 'outbox' (8 rows) and 'turns' (6 turns) of the
// fixture a few rows at a time: every row is printed once, in order, under
// one header, whatever the page; a listing cut by --limit says on stderr
// where to read on, and reading on from there gives the rest.
func TestListingsPage(t *testing.T) {
	f := mustFixture(t)
	listings := []struct {
		name string
		args []string
		rows int
	}{
		{"Outbox", []string{"outbox", "--db", f.path}, 8},
		{"Turns", []string{"turns", "--db", f.path}, 6},
	}
	for _, l := range listings {
		t.Run(l.name, func(t *testing.T) {
			is := is.New(t)
			code, whole, _ := cli(t, l.args...)
			is.Equal(code, exitOK)
			all := firstColumn(whole)
			is.Equal(len(all), l.rows) // the fixture's rows, in one page

			for _, page := range []int{1, 2, 3, l.rows, l.rows + 1} {
				t.Run(fmt.Sprintf("PagesOf%d", page), func(t *testing.T) {
					is := is.New(t)
					code, out, stderr := cliPaged(t, page, l.args...)
					is.Equal(code, exitOK)
					is.Equal(firstColumn(out), all)             // every row once, in order, one header
					is.True(!strings.Contains(stderr, "more:")) // nothing left past the limit
					code, out, _ = cliPaged(t, page, append(l.args, "--json")...)
					is.Equal(code, exitOK)
					var rows []map[string]any
					is.NoErr(json.Unmarshal([]byte(out), &rows)) // one JSON array
					is.Equal(len(rows), l.rows)                  // of every row
					is.Equal(rows[len(rows)-1]["id"], all[len(all)-1])
				})
			}

			t.Run("ALimitSaysWhereToReadOn", func(t *testing.T) {
				is := is.New(t)
				code, out, stderr := cliPaged(t, 2, append(l.args, "--limit", "5")...)
				is.Equal(code, exitOK)
				is.Equal(firstColumn(out), all[:5]) // the first five
				m := moreLine.FindStringSubmatch(stderr)
				is.True(m != nil)      // a "more:" line on stderr
				is.Equal(m[1], all[4]) // reading on after the last row printed
				code, out, stderr = cliPaged(t, 2, append(l.args, "--after", m[1])...)
				is.Equal(code, exitOK)
				is.Equal(firstColumn(out), all[5:])         // the rest
				is.True(!strings.Contains(stderr, "more:")) // and no more
			})
			t.Run("ALimitAtTheEndSaysNothingMore", func(t *testing.T) {
				is := is.New(t)
				code, out, stderr := cliPaged(t, 2, append(l.args, "--limit", fmt.Sprint(l.rows))...)
				is.Equal(code, exitOK)
				is.Equal(firstColumn(out), all)             // every row
				is.True(!strings.Contains(stderr, "more:")) // nothing past them
			})
		})
	}
}

// TestListingLimitCeiling: --limit is 1 to MaxLimit (10000); outside that
// it is a usage error naming the ceiling, and nothing is opened.
func TestListingLimitCeiling(t *testing.T) {
	f := mustFixture(t)
	for _, listing := range [][]string{{"outbox"}, {"turns"}, {"turns", "--unfinished"}} {
		for _, tc := range []struct {
			limit string
			code  int
		}{{"10000", exitOK}, {"10001", exitUsage}, {"0", exitUsage}, {"-1", exitUsage}} {
			t.Run(strings.Join(listing, "-")+"-"+tc.limit, func(t *testing.T) {
				is := is.New(t)
				code, _, stderr := cli(t, append(listing, "--db", f.path, "--limit", tc.limit)...)
				is.Equal(code, tc.code) // the exit status
				if tc.code == exitUsage {
					is.True(strings.Contains(stderr, "--limit "+tc.limit+" is not between 1 and 10000")) // names the ceiling
				}
			})
		}
	}
	t.Run("ABadAfterIsAUsageError", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "outbox", "--db", f.path, "--after", "nope")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "--after")) // names the flag
		code, _, stderr = cli(t, "turns", "--db", f.path, "--after", "nope")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "--after")) // names the flag
	})
}

// pruneFinished prunes the fixture's finished rows, as the application does
// as a matter of course: the completed and failed rows are deleted.
func pruneFinished(t *testing.T, f fixture) {
	t.Helper()
	n, err := openFixture(t, f).Prune(context.Background(), time.Now())
	if err != nil || n < 1 {
		t.Fatalf("prune: %d rows, %v", n, err)
	}
}

// 'turnframe outbox --limit N' says where to read on: after the last row it
// printed. The application prunes that row in the meantime; reading on
// from it still lists every row after it, which all still exist.
func TestOutboxReadsOnAfterAPrunedLastRow(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	code, _, stderr := cli(t, "outbox", "--db", f.path, "--limit", "3")
	is.Equal(code, exitOK)
	m := moreLine.FindStringSubmatch(stderr)
	is.True(m != nil)
	is.Equal(m[1], f.completed.String()) // read on after the completed row

	pruneFinished(t, f)
	code, rest, stderr := cli(t, "outbox", "--db", f.path, "--after", m[1])
	is.Equal(stderr, "")
	is.Equal(code, exitOK)                                                                                       // the listing goes on
	is.Equal(firstColumn(rest), []string{f.unknown.String(), f.held.String(), f.due.String(), f.later.String()}) // every row after it, once
}

// The page's "next page" link names the last row of the page it was on;
// once that row is pruned the link still leads to the rows after it.
func TestTheUIOutboxNextPageSurvivesAPrunedCursorRow(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, true) // three rows a page
	code, body := u.get("/outbox")
	is.Equal(code, http.StatusOK)
	m := regexp.MustCompile(`<a href="([^"]*)" id="next">`).FindStringSubmatch(body)
	is.True(m != nil)
	next := follow(t, "/outbox", m[1])
	is.True(strings.Contains(next, f.completed.String())) // the page ends on the completed row

	pruneFinished(t, f)
	code, body = u.get(next)
	is.Equal(code, http.StatusOK)                          // the rows after it are still there
	is.True(strings.Contains(body, f.unknown.String()))    // and listed
	is.True(!strings.Contains(body, f.completed.String())) // the pruned rows are gone
}
