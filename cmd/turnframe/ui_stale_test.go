package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The page's settle form carries the attempt it showed. The operator
// resends an unknown row; the dispatcher sends it again and that send, too,
// ends unknown; the same form then comes again (a late double click, the
// browser's "resend the form?" on reloading the result page, a tab drawn
// earlier). It is refused: the second send's unknown outcome, which nobody
// looked at, is not resent blindly.
func TestAStaleSettleFormDoesNotSettleALaterAttempt(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	ctx := context.Background()
	code, page := u.get("/id/" + f.unknown.String())
	is.Equal(code, http.StatusOK)
	is.True(strings.Contains(page, `name="attempt" value="1"`)) // the page's form names the attempt it shows
	form := settleForm(u.pageToken(), f.unknown, "resend", "the remote never got it")
	form.Set("attempt", "1") // as that form posts it

	code, _ = u.post("/settle", form, nil)
	is.Equal(code, http.StatusOK) // the first click: pending again
	is.Equal(u.status(f.unknown), turnframe.OutboxPending)

	claims, err := u.store.ClaimDue(ctx, time.Now().Add(time.Second), 10, "w2", time.Minute)
	is.NoErr(err)
	var claim turnframe.Claim
	for _, c := range claims {
		if c.ID == f.unknown {
			claim = c
		}
	}
	is.Equal(claim.ID, f.unknown) // the dispatcher sends it again…
	is.NoErr(turnframe.MarkClaimUnknown(ctx, u.store, claim, "", time.Now().Add(2*time.Second)))
	is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown) // …and that send's outcome is unknown too

	code, _ = u.post("/settle", form, nil)                        // the same form, again
	is.Equal(code, http.StatusConflict)                           // drawn before the row moved: refused
	is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown) // the new unknown is not resent blindly
}
