package main

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
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

// requeueField is the attempts a row's requeue form carries.
var requeueField = regexp.MustCompile(`<form method="post" action="/requeue"[^>]*>.*\n.*name="attempts" value="(\d+)"`)

// sendAgainUnknown claims the row id as a dispatcher does and marks its
// send's outcome unknown.
func sendAgainUnknown(t *testing.T, u *testUI, id turnframe.OutboxID) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	claims, err := u.store.ClaimDue(ctx, time.Now().Add(time.Second), 10, "w2", time.Minute)
	is.NoErr(err)
	var claim turnframe.Claim
	for _, c := range claims {
		if c.ID == id {
			claim = c
		}
	}
	is.Equal(claim.ID, id) // sent again…
	is.NoErr(turnframe.MarkClaimUnknown(ctx, u.store, claim, "", time.Now().Add(2*time.Second)))
}

// The page's requeue form carries the attempts it showed. The operator
// requeues a failed row; it is sent again, its outcome is unknown, and the
// operator then settles it failed (the order was cancelled: it must not go
// out). The first requeue form then comes again (a reload of its result
// page, a late double click): it is refused, and the row is not sent once
// more against the later decision.
func TestAStaleRequeueFormDoesNotResendALaterFailure(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	code, page := u.get("/id/" + f.failed.String())
	is.Equal(code, http.StatusOK)
	m := requeueField.FindStringSubmatch(page)
	is.True(m != nil)   // the page's requeue form names the attempts it shows
	is.Equal(m[1], "1") // the row's one attempt
	token := u.pageToken()
	requeue := url.Values{"token": {token}, "id": {f.failed.String()}, "attempts": {m[1]}} // as that form posts it

	code, _ = u.post("/requeue", requeue, nil)
	is.Equal(code, http.StatusOK)
	sendAgainUnknown(t, u, f.failed)
	settle := settleForm(token, f.failed, "failed", "order cancelled: it must not go out")
	settle.Set("attempt", "2")
	code, _ = u.post("/settle", settle, nil)
	is.Equal(code, http.StatusOK) // …and the operator decided it must not go
	is.Equal(u.status(f.failed), turnframe.OutboxFailed)

	code, body := u.post("/requeue", requeue, nil) // the first requeue form, re-posted
	is.Equal(code, http.StatusConflict)            // drawn before the row was sent again: refused
	is.True(strings.Contains(body, "it moved since this page was drawn"))
	is.Equal(u.status(f.failed), turnframe.OutboxFailed) // not sent again

	requeue.Del("attempts")
	code, _ = u.post("/requeue", requeue, nil)
	is.Equal(code, http.StatusBadRequest)                // a form without the attempts it showed is not the page's
	is.Equal(u.status(f.failed), turnframe.OutboxFailed) // not sent again
}

// raceAfterRead is an opStore whose first GetOutbox, once it has read,
// runs during: what another operator and the dispatcher do between a
// write's read of the row and the write itself.
type raceAfterRead struct {
	opStore
	during func()
	done   atomic.Bool
}

func (s *raceAfterRead) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	rec, err := s.opStore.GetOutbox(ctx, id)
	if s.done.CompareAndSwap(false, true) {
		s.during()
	}
	return rec, err
}

// Two operators requeue one failed row at once. The second's read sees it
// failed at the attempt its form showed; before its write, the first
// operator's requeue lands, the row is sent again and fails again. The
// second requeue is refused by the store, in its own transaction: the
// later failure nobody looked at is not sent once more.
func TestARequeueRacingAnotherIsFencedInItsWrite(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	ctx := context.Background()
	racing := &raceAfterRead{opStore: u.ui.store, during: func() {
		is.NoErr(u.store.Requeue(ctx, f.failed, 1, time.Now())) // the first operator's requeue
		claims, err := u.store.ClaimDue(ctx, time.Now().Add(time.Second), 10, "w2", time.Minute)
		is.NoErr(err)
		for _, c := range claims {
			if c.ID == f.failed {
				is.NoErr(turnframe.FailClaim(ctx, u.store, c, "http.400", time.Now().Add(2*time.Second))) // failed again, at attempt 2
			}
		}
	}}
	requeue := url.Values{"token": {u.pageToken()}, "id": {f.failed.String()}, "attempts": {"1"}}
	u.ui.store = racing
	code, _ := u.post("/requeue", requeue, nil)
	is.Equal(code, http.StatusConflict) // refused in the write
	is.True(racing.done.Load())         // the race ran
	got, err := u.store.GetOutbox(ctx, f.failed)
	is.NoErr(err)
	is.Equal(got.Status, turnframe.OutboxFailed) // not sent once more
	is.Equal(got.Attempts, 2)
}
