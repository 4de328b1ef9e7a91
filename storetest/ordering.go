package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func orderingTests() []test {
	return []test{
		{"RowsOfOneOrderKeyAreClaimableStrictlyInEnqueueOrder", testOrderedStrict},
		{"TheSameOrderKeyOfAnotherAccountIsIndependent", testOrderedPerAccount},
		{"RowsWithoutAnOrderKeyAreUnordered", testUnordered},
		{"APendingHeadNotYetDueHoldsBackItsOrderKey", testOrderedHeadNotDue},
		{"AnUnknownHeadHoldsBackItsOrderKeyUntilResolved", testOrderedUnknownHead},
		{"AFailedHeadReleasesItsOrderKey", testOrderedFailedHead},
		{"ARowEnqueuedAfterItsKeysRowsFinishedIsClaimable", testOrderedEnqueuedAfterFinished},
		{"OrderedClaimMatchesAReferenceModel", testOrderedModel},
	}
}

func testOrderedStrict(t *testing.T, e *env) {
	is := is.New(t)
	first := e.enqueue(acme, at(0), message("card-7"), message("card-7"))
	second := e.enqueue(acme, at(time.Second), message("card-7"))
	now := at(time.Minute)

	got := e.claim(now, 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{first[0].ID})    // only the head of the key, even in one batch
	is.Equal(len(e.claim(now, 10, worker)), 0)                      // the rest wait while the head is dispatching
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, got[0], "busy", now)) // the head is pending again
	got = e.claim(now, 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{first[0].ID})   // the head again, never its successor
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, got[0], "", now)) // the head is done
	got = e.claim(now, 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{first[1].ID}) // then the second
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, got[0], "", now))
	got = e.claim(now, 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{second[0].ID}) // then the third, from another commit
}

func testOrderedPerAccount(t *testing.T, e *env) {
	is := is.New(t)
	a := e.enqueue(acme, at(0), message("card-7"), message("card-7"))
	g := e.enqueue(globex, at(0), message("card-7"), message("card-7"))
	got := e.claim(at(time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{a[0].ID, g[0].ID})          // each account's head
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, got[1], "", at(time.Second))) // globex's head done
	got = e.claim(at(time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{g[1].ID}) // globex goes on while acme's head is out
}

func testUnordered(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message(""), message(""), message(""))
	got := e.claim(at(time.Second), 10, worker)
	is.Equal(claimedIDs(got), entryIDs(rows)) // all at once
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, got[0], "", at(time.Second)))
	more := e.enqueue(acme, at(time.Second), message(""))
	is.Equal(claimedIDs(e.claim(at(time.Second), 10, worker)), entryIDs(more)) // an unknown row holds nothing back without an order key
}

func testOrderedHeadNotDue(t *testing.T, e *env) {
	is := is.New(t)
	head := message("k")
	head.NotBefore = at(time.Hour)
	first := e.enqueue(acme, at(0), head)
	second := e.enqueue(acme, at(time.Second), message("k"))
	is.Equal(len(e.claim(at(time.Minute), 10, worker)), 0) // the successor is due but its head is pending
	got := e.claim(at(time.Hour), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{first[0].ID}) // the head, when due
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, got[0], "", at(time.Hour)))
	is.Equal(claimedIDs(e.claim(at(time.Hour), 10, worker)), []turnframe.OutboxID{second[0].ID}) // then the successor
}

func testOrderedUnknownHead(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message("k"), message("k"))
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "req-1", at(time.Second))) // the head's outcome is unknown
	is.Equal(len(e.claim(at(time.Hour), 10, worker)), 0)                          // its successor waits
	is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: rows[0].ID, Verdict: turnframe.VerdictCompleted, Now: at(time.Hour)}))
	is.Equal(claimedIDs(e.claim(at(time.Hour), 10, worker)), []turnframe.OutboxID{rows[1].ID}) // resolved, the successor goes
}

func testOrderedFailedHead(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message("k"), message("k"), message("k"))
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "declined", at(time.Second))) // the head failed
	got := e.claim(at(time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[1].ID}) // a failed row holds nothing back
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, got[0], "", at(time.Second)))
	is.NoErr(e.s.Requeue(e.ctx, rows[0].ID, 0, at(2*time.Second))) // an operator requeues the failed head
	got = e.claim(at(2*time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[0].ID}) // requeued, it is the earliest holder again: the third row waits
}

// A Failed row lets the rows after it go (DESIGN.md, Ordered delivery),
// and so does a Completed one: a row enqueued after every earlier row of
// its key finished, failed or completed, is due at once. (pgstore marked
// such a row held by the key's failed row, for good: nothing would let it go.)
func testOrderedEnqueuedAfterFinished(t *testing.T, e *env) {
	is := is.New(t)
	e.enqueue(acme, at(0), message("k"), message("k"))
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "declined", at(time.Second))) // the head failed
	c = e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "", at(time.Second))) // the second completed
	later := e.enqueue(acme, at(2*time.Second), message("k"))
	got := e.claim(at(3*time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{later[0].ID}) // nothing active before it: it goes
}
