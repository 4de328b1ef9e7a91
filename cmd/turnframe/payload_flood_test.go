package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestAPayloadAsLongAsTheLimitDoesNotFloodTheOperator proves that 'show' and
// the page show the first payloadShown bytes of a long payload and its
// size, so a row an application enqueued with megabytes (MaxPayloadLen is
// 16 MiB) leaves its status and history readable; --json prints it whole.
func TestAPayloadAsLongAsTheLimitDoesNotFloodTheOperator(t *testing.T) {
	f := mustFixture(t)
	const n = 1 << 20
	cases := []struct {
		name    string
		payload []byte
		shown   string // what the text shows of it
	}{
		{"Text", bytes.Repeat([]byte("é"), n/2), strings.Repeat("é", payloadShown/2)},
		{"Binary", bytes.Repeat([]byte{0xff}, n), "base64:" + strings.Repeat("/", payloadShown-len("base64:"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			store := openFixture(t, f)
			ctx := context.Background()
			tx, err := store.BeginTx(ctx)
			is.NoErr(err)
			_, err = tx.ExecContext(ctx, "UPDATE outbox SET payload = ? WHERE id = ?", tc.payload, f.unknown.String())
			is.NoErr(err)
			is.NoErr(tx.Commit())
			code, out, stderr := cli(t, "show", "--db", f.path, f.unknown.String())
			is.Equal(stderr, "")
			is.Equal(code, exitOK)
			is.True(len(out) < 16<<10)                                                                       // a screenful, not a megabyte
			is.True(regexp.MustCompile(`\npayload: +` + regexp.QuoteMeta(tc.shown) + "\n").MatchString(out)) // its beginning
			is.True(strings.Contains(out, "1048576 bytes; shown cut to 4096"))                               // and its size
			is.True(strings.Contains(out, "history:"))                                                       // the history still follows

			code, out, _ = cli(t, "show", "--db", f.path, f.unknown.String(), "--json")
			is.Equal(code, exitOK)
			var v struct {
				Outbox outboxJSON `json:"outbox"`
			}
			is.NoErr(json.Unmarshal([]byte(out), &v))
			is.True(len(v.Outbox.Payload)+len(v.Outbox.PayloadBase64) >= n) // whole in JSON

			u := newTestUI(t, f, true)
			status, body := u.get("/id/" + f.unknown.String())
			is.Equal(status, http.StatusOK)
			is.True(len(body) < 32<<10)                                         // the page too
			is.True(strings.Contains(body, "1048576 bytes; shown cut to 4096")) // with the size
		})
	}
}
