package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// An operator's Requeue and ReleaseClaim carry the attempts the operator
// saw (0: no fence). The store checks them in the transaction that moves
// the row, so a decision taken on a look at one failure or one claim never
// moves the row once it has failed again or been claimed again.

func opFenceTests() []test {
	return []test{
		{"RequeueAtTheAttemptsSeenMovesTheRowAndAtOthersChangesNothing", testRequeueFence},
		{"ReleaseClaimUnderTheClaimSeenMovesTheRowAndUnderAnotherChangesNothing", testReleaseFence},
		{"ANegativeOperatorFenceIsInvalid", testNegativeFence},
	}
}

func testRequeueFence(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "http.400", at(2*time.Second))) // failed at attempt 1

	for _, stale := range []int{2, 7} {
		e.refusedOp("requeue decided at other attempts", turnframe.ErrConflict, func() error {
			return e.s.Requeue(e.ctx, r.ID, stale, at(3*time.Second))
		})
	}
	is.NoErr(e.s.Requeue(e.ctx, r.ID, 1, at(3*time.Second))) // the failure the operator saw
	is.Equal(e.row(r.ID).Status, turnframe.OutboxPending)    // requeued

	c = e.claimOne(at(3*time.Second), worker)
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "http.400", at(4*time.Second))) // failed again, at attempt 2
	e.refusedOp("requeue on the look at the first failure", turnframe.ErrConflict, func() error {
		return e.s.Requeue(e.ctx, r.ID, 1, at(5*time.Second))
	})
	is.NoErr(e.s.Requeue(e.ctx, r.ID, 0, at(5*time.Second))) // no fence: the status rule alone
	is.Equal(e.row(r.ID).AttemptBase, 2)                     // a fresh budget after both attempts
}

func testReleaseFence(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	e.claimOne(at(time.Second), worker) // attempt 1
	e.refusedOp("release under a claim not yet taken", turnframe.ErrConflict, func() error {
		return e.s.ReleaseClaim(e.ctx, r.ID, 2, at(2*time.Second))
	})
	is.NoErr(e.s.ReleaseClaim(e.ctx, r.ID, 1, at(2*time.Second))) // the claim the operator saw
	is.Equal(e.row(r.ID).Status, turnframe.OutboxPending)         // released

	again := e.claimOne(at(2*time.Second), "worker-2") // attempt 2, a live claim
	e.refusedOp("release on the look at the first claim", turnframe.ErrConflict, func() error {
		return e.s.ReleaseClaim(e.ctx, r.ID, 1, at(3*time.Second))
	})
	is.NoErr(e.s.ReleaseClaim(e.ctx, r.ID, 0, at(3*time.Second))) // no fence: the status rule alone
	e.refusedOp("settle of the released claim", turnframe.ErrClaimLost, func() error {
		return turnframe.CompleteClaim(e.ctx, e.s, again, "", at(4*time.Second))
	})
}

func testNegativeFence(t *testing.T, e *env) {
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	e.refusedOp("release fenced at -1", turnframe.ErrInvalid, func() error {
		return e.s.ReleaseClaim(e.ctx, r.ID, -1, at(2*time.Second))
	})
	is.New(t).NoErr(turnframe.FailClaim(e.ctx, e.s, c, "http.400", at(2*time.Second))) // failed at attempt 1
	e.refusedOp("requeue fenced at -1", turnframe.ErrInvalid, func() error {
		return e.s.Requeue(e.ctx, r.ID, -1, at(3*time.Second))
	})
}
