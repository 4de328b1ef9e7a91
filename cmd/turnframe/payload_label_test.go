package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestATextPayloadThatReadsAsBase64IsToldFromABinaryOne proves that a
// payload of text that begins with "base64:" — which is how 'show' and the
// page label a payload that is not UTF-8 — is said to be text, so it is
// never shown as the binary payload it would otherwise print the same as.
func TestATextPayloadThatReadsAsBase64IsToldFromABinaryOne(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	tx, err := store.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "UPDATE outbox SET payload = ? WHERE id = ?", []byte{0xff, 0xfe}, f.due.String()) // binary: base64 //4=
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, "UPDATE outbox SET payload = ? WHERE id = ?", []byte("base64://4="), f.later.String()) // text spelling the same
	is.NoErr(err)
	is.NoErr(tx.Commit())
	payload := regexp.MustCompile(`\npayload[^\n]*(\npayload note:[^\n]*)?`)
	_, binary, _ := cli(t, "show", "--db", f.path, f.due.String())
	_, text, _ := cli(t, "show", "--db", f.path, f.later.String())
	is.True(payload.FindString(binary) != "")                               // shown
	is.True(payload.FindString(binary) != payload.FindString(text))         // the two are told apart
	is.True(strings.Contains(text, "text, not a binary payload in base64")) // the text says it is text

	u := newTestUI(t, f, true)
	status, body := u.get("/id/" + f.later.String())
	is.Equal(status, http.StatusOK)
	is.True(strings.Contains(body, "text, not a binary payload in base64")) // and so does the page
	status, body = u.get("/id/" + f.due.String())
	is.Equal(status, http.StatusOK)
	is.True(!strings.Contains(body, "text, not a binary payload in base64")) // not the binary one
}
