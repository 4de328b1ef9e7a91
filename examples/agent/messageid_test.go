package main

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A chat platform's message id is whatever the platform chose: it may
// begin with a space, hold a '~' or a '/', or run to
// turnframe.MaxMessageIDLen bytes. ReceiveMessage takes every such id, and
// so must the keys and cases the example derives from it: a key that
// embedded the id as it is was refused (ErrInvalid) after the turn was
// received, so neither the first delivery nor recovery could ever plan it,
// and every resend was told "I am still working on that.".
func TestAnyMessageIDMakesValidKeys(t *testing.T) {
	ids := []struct{ name, id string }{
		{"LeadingSpace", " m2"},
		{"OutboxKeySeparator", "m~2"},
		{"Slash", "chat/42/m2"},
		{"LongestID", strings.Repeat("m", turnframe.MaxMessageIDLen)},
		{"LongerThanACase", strings.Repeat("€", 70)},
	}
	for _, tt := range ids {
		for tool, text := range map[string]string{"Search": askSearch, "Book": askBook} {
			t.Run(tt.name+"/"+tool, func(t *testing.T) {
				is := is.New(t)
				ctx := context.Background()
				a, p, out := startedAgent(ctx, t)
				msg := message{ID: tt.id, Text: text}
				is.NoErr(a.respond(ctx, p, msg, false)) // the first delivery is interpreted and answered
				is.NoErr(a.respond(ctx, p, msg, false)) // and a resend answered from its turn
				t.Log(out.String())
				for _, call := range script[text] {
					e, err := p.store.ByKey(ctx, account, command(tt.id, call).Key)
					is.NoErr(err)                   // each tool call admitted
					is.Equal(callOf(e).ID, call.ID) // under a key its call id is read back from
				}
				is.Equal(strings.Count(out.String(), "model calls "), len(script[text])) // once
				is.Equal(strings.Count(out.String(), "(again, from the first turn)"), 1) // the resend got the first answer
			})
		}
	}
}
