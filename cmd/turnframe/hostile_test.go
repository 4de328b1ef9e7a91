package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// mustHostileFixture is a fixture in which stored data tries to break the
// output, as a file an older turnframe wrote may: the completed row's key
// holds a newline followed by a forged row, the failed row's last code a
// tab, and the later row is due, and the unknown row was updated, after
// year 9999. The API refuses such values now, so they are written with SQL
// in the store's own transaction.
func mustHostileFixture(t *testing.T) (fixture, string) {
	t.Helper()
	f := mustFixture(t)
	const forged = "key-ok\n01J9Z3K8Q5R6S7T8V9W0X1Y2Z3  failed  acme  forged"
	ctx := context.Background()
	store := openFixture(t, f)
	tx, err := store.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	farFuture := time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, u := range []struct {
		query string
		args  []any
	}{
		{"UPDATE outbox SET key = ? WHERE id = ?", []any{forged, f.completed.String()}},
		{"UPDATE outbox SET last_code = ? WHERE id = ?", []any{"http.400\tfake-column", f.failed.String()}},
		{"UPDATE outbox SET due_at = ? WHERE id = ?", []any{farFuture, f.later.String()}},
		{"UPDATE outbox SET updated_at = ? WHERE id = ?", []any{farFuture, f.unknown.String()}},
	} {
		if _, err := tx.ExecContext(ctx, u.query, u.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return f, forged
}

// TestHostileData proves issue 12, item 14: table cells are escaped, so a
// stored value can never add or split a row, and --json never fails on a
// stored time, however far out of range.
func TestHostileData(t *testing.T) {
	f, forged := mustHostileFixture(t)
	const far = "10000-01-01T00:00:00Z"
	tables := []struct {
		name  string
		args  []string
		lines int      // the lines the output must have
		holds []string // escaped values it must show
	}{
		{"OutboxTable", []string{"outbox"}, 9, []string{`"key-ok\n01J9Z3K8Q5R6S7T8V9W0X1Y2Z3  failed  acme  forged"`, `"http.400\tfake-column"`}},
		{"ShowARow", []string{"show", f.completed.String()}, -1, []string{`key:          "key-ok\n01J9Z3K8Q5R6S7T8V9W0X1Y2Z3  failed  acme  forged"`}},
		{"ShowATurn", []string{"show", f.delivered.String()}, -1, []string{`"key-ok\n01J9`, `"http.400\tfake-column"`}},
		{"Status", []string{"status"}, -1, []string{"10000-01-01T00:00:00.000Z"}},
	}
	for _, tc := range tables {
		t.Run("EscapesCells_"+tc.name, func(t *testing.T) {
			is := is.New(t)
			code, out, stderr := cli(t, append(tc.args, "--db", f.path)...)
			is.Equal(stderr, "")
			is.Equal(code, exitOK)
			is.True(!strings.Contains(out, forged)) // the newline never reaches the output raw
			is.True(!strings.Contains(out, "\tfake-column"))
			for _, line := range strings.Split(out, "\n") {
				is.True(!strings.HasPrefix(line, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")) // no forged row
			}
			if tc.lines > 0 {
				is.Equal(len(strings.Split(strings.TrimSpace(out), "\n")), tc.lines) // one line per row, and the header
			}
			for _, want := range tc.holds {
				is.True(strings.Contains(out, want)) // the value, escaped
			}
		})
	}
	jsons := []struct {
		name string
		args []string
		path func(v any) any // where the far time is
	}{
		{"Outbox", []string{"outbox"}, func(v any) any { return find(v, f.later.String())["due_at"] }},
		{"Status", []string{"status"}, func(v any) any { return v.(map[string]any)["unknown"].([]any)[0].(map[string]any)["updated_at"] }},
		{"ShowARow", []string{"show", f.later.String()}, func(v any) any { return v.(map[string]any)["outbox"].(map[string]any)["due_at"] }},
		{"ShowATurn", []string{"show", f.delivered.String()}, func(v any) any { return find(v.(map[string]any)["outbox"], f.later.String())["due_at"] }},
	}
	for _, tc := range jsons {
		t.Run("JSONNeverFails_"+tc.name, func(t *testing.T) {
			is := is.New(t)
			code, out, stderr := cli(t, append(tc.args, "--db", f.path, "--json")...)
			is.Equal(stderr, "")
			is.Equal(code, exitOK)
			var v any
			is.NoErr(json.Unmarshal([]byte(out), &v)) // valid JSON
			is.Equal(tc.path(v), far)                 // the time past 9999, printed as it is
		})
	}
	t.Run("JSONKeepsTheKeyAsItIs", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var v []map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(find(v, f.completed.String())["key"], forged) // JSON escapes it itself
	})
}

// find returns the object with this id in a decoded JSON array.
func find(list any, id string) map[string]any {
	var items []any
	switch l := list.(type) {
	case []any:
		items = l
	case []map[string]any:
		for _, m := range l {
			items = append(items, m)
		}
	}
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["id"] == id {
			return m
		}
	}
	return nil
}

func TestCell(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"plain", "plain"},
		{"€20.00 deposit", "€20.00 deposit"}, // printable, spaces inside
		{"two\nlines", `"two\nlines"`},
		{"a\tb", `"a\tb"`},
		{"bell\a", `"bell\a"`},
		{"\u202eevil", `"\u202eevil"`}, // a right-to-left override hides text
		{"\xff", `"\xff"`},             // not UTF-8
		{"-", `"-"`},                   // not the empty cell
		{`"quoted"`, `"\"quoted\""`},   // never mistaken for an escaped value
		{" padded", `" padded"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			is := is.New(t)
			is.Equal(cell(tc.in), tc.want)
		})
	}
	t.Run("JSONTimeNeverFails", func(t *testing.T) {
		is := is.New(t)
		for _, tm := range []time.Time{turnframe.MaxTime, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
			_, err := json.Marshal(at(tm))
			is.NoErr(err) // every time prints
		}
	})
}

// TestCellEscapesWhatIsDrawnBlank proves that a value holding a rune
// strconv.IsPrint takes but a terminal draws as nothing or as a blank (a
// combining grapheme joiner, a variation selector, a Hangul filler, the
// Braille blank: an actor an earlier release kept, a note, a code) is
// shown escaped, that rune spelled out, so "recovery\u034f" is never shown
// as turnframe's own "recovery"; and that the page shows it so too.
func TestCellEscapesWhatIsDrawnBlank(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"recovery\u034f", `"recovery\u034f"`},
		{"policy\ufe0f", `"policy\ufe0f"`},
		{"operator\U000e0100", `"operator\U000e0100"`},
		{"recovery\u3164", `"recovery\u3164"`},
		{"\u115fpolicy", `"\u115fpolicy"`},
		{"recovery\u2800", `"recovery\u2800"`},
		{"a\u034f\n\"支付\xff", `"a\u034f\n\"支付\xff"`}, // with what strconv.Quote escapes, and what it keeps
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			is := is.New(t)
			is.Equal(cell(tc.in), tc.want)  // the blank rune spelled out
			is.Equal(shown(tc.in), tc.want) // on the page too
		})
	}
}
