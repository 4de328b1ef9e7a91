package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// disguise is text an application or a remote may put in front of an
// operator to hide or rewrite what it shows: a terminal's clear-screen, a
// carriage return, a right-to-left override that reverses what follows, a
// zero-width space that makes "recovery" of "recovery\u200b", DEL and a C1
// control, and a combining grapheme joiner, printable yet drawn as nothing.
const disguise = "\x1b[2J\r\u202e\u200b\x7f\u009b\u034f"

// disguisedRunes are the runes of disguise, each of which must never reach
// an operator as it is.
var disguisedRunes = []string{"\x1b", "\r", "\u202e", "\u200b", "\x7f", "\u009b", "\u034f"}

// mustDisguisedFixture is a fixture whose every stored text an application
// or a remote supplied ends with disguise: the notes, actors, codes and
// references of the audit trail, the rows' destinations, codes, claims and
// payloads, the commands' names and cases, the turns' texts, the events'
// types, and one row's key. Written with SQL, as a file an older turnframe
// wrote may hold them.
func mustDisguisedFixture(t *testing.T) fixture {
	t.Helper()
	f := mustFixture(t)
	ctx := context.Background()
	store := openFixture(t, f)
	tx, err := store.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		"UPDATE history SET note = note || ?1, actor = actor || ?1, code = code || ?1, remote_ref = remote_ref || ?1",
		"UPDATE outbox SET destination = destination || ?1, last_code = last_code || ?1, remote_ref = remote_ref || ?1, claimed_by = claimed_by || ?1, order_key = order_key || ?1, payload = CAST(?1 AS BLOB)",
		"UPDATE journal SET name = name || ?1, code = code || ?1, remote_ref = remote_ref || ?1, case_key = case_key || ?1",
		"UPDATE turns SET text = text || ?1",
		"UPDATE events SET type = type || ?1",
		"UPDATE outbox SET key = key || ?1 WHERE id = '" + f.later.String() + "'",
	} {
		if _, err := tx.ExecContext(ctx, q, disguise); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return f
}

// formValue is a form field's value: the exact stored text a button posts
// back, which the browser never shows.
var formValue = regexp.MustCompile(`value="[^"]*"`)

// TestThePageShowsDisguisedTextEscaped proves that the page draws text an
// application or a remote supplied as the CLI's tables do: a value holding
// a control or format character (a bidi override, a zero-width space) is
// shown as a Go string literal, so none of them reaches the browser to
// hide, reverse or disguise what the operator reads.
func TestThePageShowsDisguisedTextEscaped(t *testing.T) {
	f := mustDisguisedFixture(t)
	u := newTestUI(t, f, false)
	for _, path := range []string{
		"/", "/outbox", "/outbox?status=failed",
		"/id/" + f.unknown.String(), "/id/" + f.later.String(), "/id/" + f.delivered.String(), "/id/" + f.unknownDelivered.String(),
		"/entry?account=acme&key=key-ask-remote",
	} {
		t.Run(path, func(t *testing.T) {
			is := is.New(t)
			code, body := u.get(path)
			is.Equal(code, http.StatusOK)
			shown := formValue.ReplaceAllString(body, "")
			for _, r := range disguisedRunes {
				is.True(!strings.Contains(shown, r)) // drawn escaped, never as it is
			}
			is.True(strings.Contains(shown, `\x1b[2J\r\u202e\u200b\x7f\u009b`)) // the escapes, for the operator to read
		})
	}
}
