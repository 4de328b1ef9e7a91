package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// The rules of expiry (issue 13): a claim whose lease ended may have
// started its send, so ExpireClaims moves its row to OutcomeUnknown
// (storekit.ExpireRow, code turnframe.CodeLeaseEnded), never back to
// Pending; the row still holds its order key and is not claimed again until
// Resolve moves it. A live lease is never touched.

func expireTests() []test {
	return []test{
		{"ExpireClaimsNeverTouchesALeaseThatRunsAfterNow", testExpireLive},
		{"ExpireClaimsMovesARowWhoseLeaseEndedAtOrBeforeNowToOutcomeUnknown", testExpireEnded},
		{"AnExpiredRowKeepsItsDueTimeAttemptsClaimAndRemoteRef", testExpireKeeps},
		{"ExpireClaimsReturnsIdsInEnqueueOrder", testExpireOrder},
		{"AnExpiredRowIsNotClaimedAgainUntilResolved", testExpiredNotClaimed},
		{"AnExpiredRowHoldsItsOrderKeyUntilResolved", testExpiredHoldsOrder},
		{"ExpireClaimsTouchesNoRowThatIsNotDispatching", testExpireOtherStatuses},
		{"AnExpiryIsRecordedWithANoteSayingWhyTheOutcomeIsUnknown", testExpireNote},
	}
}

// expire calls ExpireClaims at now, which must succeed.
func (e *env) expire(now time.Time) []turnframe.OutboxID {
	e.t.Helper()
	ids, err := e.s.ExpireClaims(e.ctx, now)
	if err != nil {
		e.t.Fatalf("expire claims at %v: %v", now, err)
	}
	return ids
}

func testExpireLive(t *testing.T, e *env) {
	e.enqueue(acme, at(0), message(""))
	c := e.claimOne(at(time.Second), worker) // leased until 1s + lease
	for _, now := range []time.Time{at(time.Second), at(5 * time.Second), c.LeaseUntil.Add(-time.Microsecond)} {
		t.Run(fmt.Sprintf("at_%v", now.Sub(base)), func(t *testing.T) {
			is := is.New(t)
			before := e.snapshot()
			is.Equal(len(e.expire(now)), 0) // a live lease is never expired
			e.unchanged(before, "expiry of a live lease")
		})
	}
}

func testExpireEnded(t *testing.T, e *env) {
	for _, tc := range []struct {
		name  string
		after time.Duration
	}{
		{"AtTheLeaseEnd", 0},
		{"AMicrosecondAfter", time.Microsecond},
		{"AnHourAfter", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r := e.enqueue(acme, at(0), message(""))[0]
			c := e.claimOne(at(time.Second), worker)
			before := e.row(r.ID)
			now := c.LeaseUntil.Add(tc.after)
			is.Equal(e.expire(now), []turnframe.OutboxID{r.ID}) // the ended lease expires
			got := e.row(r.ID)
			want, err := storekit.ExpireRow(before, now)
			is.NoErr(err)                                        // the rule expires it
			is.True(sameRecord(got, want))                       // stored as the rule says
			is.Equal(got.Status, turnframe.OutboxOutcomeUnknown) // its send may have started: unknown, not pending
			is.Equal(got.LastCode, turnframe.CodeLeaseEnded)     // and says why
			is.True(got.LeaseUntil.IsZero())                     // no lease
			is.True(got.UpdatedAt.Equal(now))                    // updated at the expiry
			is.Equal(len(e.expire(now.Add(time.Hour))), 0)       // expired once
		})
	}
}

func testExpireKeeps(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	first := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, first, "http.503", at(2*time.Second))) // retried: due at 2s
	c := e.claimOne(at(3*time.Second), worker)
	is.Equal(e.expire(c.LeaseUntil), []turnframe.OutboxID{r.ID}) // expired
	got := e.row(r.ID)
	is.True(got.DueAt.Equal(at(2 * time.Second)))     // due time kept
	is.Equal(got.Attempts, 2)                         // attempts kept: the fence never repeats
	is.Equal(got.AttemptBase, 0)                      // budget kept
	is.Equal(got.ClaimedBy, worker)                   // the last claim is still on record
	is.True(got.ClaimedAt.Equal(at(3 * time.Second))) // when it was made
	is.True(got.FinishedAt.IsZero())                  // not finished
}

func testExpireOrder(t *testing.T, e *env) {
	is := is.New(t)
	late := message("")
	late.NotBefore = at(5 * time.Second)
	first := e.enqueue(acme, at(0), late, message(""), message(""))
	second := e.enqueue(globex, at(0), message(""))
	r0, r1, r2, r3 := first[0].ID, first[1].ID, first[2].ID, second[0].ID

	// Claimed r1, r2, r3, r0; leases ending r0, r3, r2, r1.
	for _, step := range []struct {
		at    time.Duration
		lease time.Duration
		want  turnframe.OutboxID
	}{
		{time.Second, 30 * time.Second, r1},
		{time.Second, 20 * time.Second, r2},
		{time.Second, 10 * time.Second, r3},
		{5 * time.Second, time.Second, r0},
	} {
		cs, err := e.s.ClaimDue(e.ctx, at(step.at), 1, worker, step.lease)
		is.NoErr(err)                                             // claim
		is.Equal(claimedIDs(cs), []turnframe.OutboxID{step.want}) // claimed in due order
	}
	is.Equal(e.expire(at(time.Hour)), []turnframe.OutboxID{r0, r1, r2, r3}) // enqueue order, not claim or lease order
}

func testExpiredNotClaimed(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	e.expire(c.LeaseUntil)
	is.Equal(len(e.claim(at(time.Hour), 10, "worker-2")), 0)    // never claimed again blindly
	is.Equal(len(e.expire(at(2*time.Hour))), 0)                 // nor expired again
	is.Equal(len(e.claim(at(24*time.Hour), 10, "worker-2")), 0) // still not claimed

	is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictResend, Actor: turnframe.ActorPolicy, Now: at(25 * time.Hour)}))
	again := e.claimOne(at(25*time.Hour), "worker-2")
	is.Equal(again.ID, r.ID)    // claimed again after a resend verdict
	is.Equal(again.Attempts, 2) // under a new attempt
}

func testExpiredHoldsOrder(t *testing.T, e *env) {
	for _, tc := range []struct {
		verdict turnframe.Verdict
		next    int // the row of the key claimed next: 0 the head again, 1 its successor
	}{
		{turnframe.VerdictCompleted, 1},
		{turnframe.VerdictFailed, 1},
		{turnframe.VerdictResend, 0},
	} {
		t.Run(tc.verdict.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			rows := e.enqueue(acme, at(0), message("k"), message("k"))
			free := e.enqueue(acme, at(0), message("other"))[0]
			cs := e.claim(at(time.Second), 10, worker)
			is.Equal(claimedIDs(cs), []turnframe.OutboxID{rows[0].ID, free.ID}) // the head of k, and the other key
			is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[1], "", at(2*time.Second)))

			e.expire(cs[0].LeaseUntil)
			later := e.enqueue(acme, at(time.Minute), message("other"))[0]
			got := e.claim(at(time.Hour), 10, worker)
			is.Equal(claimedIDs(got), []turnframe.OutboxID{later.ID}) // k waits behind its expired head; another key goes on
			is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: rows[0].ID, Verdict: tc.verdict, Now: at(time.Hour)}))
			got = e.claim(at(time.Hour), 10, worker)
			is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[tc.next].ID}) // resolved, the key moves on, in order
		})
	}
}

func testExpireOtherStatuses(t *testing.T, e *env) {
	for _, from := range []turnframe.OutboxStatus{
		turnframe.OutboxPending, turnframe.OutboxCompleted, turnframe.OutboxFailed,
		turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention,
	} {
		t.Run(from.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			e.rowIn(from, true)
			before := e.snapshot()
			is.Equal(len(e.expire(at(time.Hour))), 0) // only a dispatching row expires
			e.unchanged(before, "expire")
		})
	}
}

// testExpireNote: ExpireClaims names no note, yet its record must tell a
// person reading the trail why the row is unknown: its claim's lease ended
// and its send may have started (storekit.RowHistory gives the note).
func testExpireNote(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.Equal(e.expire(c.LeaseUntil), []turnframe.OutboxID{r.ID})
	hist := e.history(turnframe.OutboxSubject(acme, r.ID))
	last := hist[len(hist)-1]
	is.Equal(last.From, turnframe.OutboxDispatching.String())
	is.Equal(last.To, turnframe.OutboxOutcomeUnknown.String())
	is.Equal(last.Code, turnframe.CodeLeaseEnded)
	is.Equal(last.Actor, turnframe.ActorRecovery)
	is.True(last.Note != "") // says why: the lease ended, and the send may have started
}
