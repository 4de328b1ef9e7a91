package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of claim leases (issue 11 item 5): a claim holds its row until
// its lease ends; only an ended lease is expired (expire.go), unless an
// operator forces one row back; a worker still sending extends its leases.

func leaseTests() []test {
	return []test{
		{"ExtendClaimsMovesALeaseForwardAndNeverBackwards", testExtendForward},
		{"ExtendClaimsMovesALeaseForwardByAsLittleAsAMicrosecond", testExtendMicrosecond},
		{"ExtendClaimsAnswersPerClaimAndALostClaimChangesNothing", testExtendLost},
		{"ReleaseClaimForceReleasesALiveClaim", testReleaseClaim},
		{"ASettlementAfterAnExpiryOrAReleaseIsClaimLostAndChangesNothing", testSettleAfterRelease},
		{"AClaimWhoseLeaseEndedStillHoldsItsRowUntilTheRowIsExpiredOrReleased", testLeaseEndedStillHeld},
	}
}

func testExtendForward(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)          // until 11s
	is.True(c.LeaseUntil.Equal(at(11 * time.Second))) // claimed at 1s for 10s

	is.NoErr(extendOne(e, c, at(5*time.Second), 10*time.Second))  // to 15s
	is.True(e.row(r.ID).LeaseUntil.Equal(at(15 * time.Second)))   // moved forward to now + lease
	is.NoErr(extendOne(e, c, at(6*time.Second), time.Second))     // to 7s: earlier than 15s
	is.True(e.row(r.ID).LeaseUntil.Equal(at(15 * time.Second)))   // never moved backwards
	is.NoErr(extendOne(e, c, at(12*time.Second), 10*time.Second)) // after the first lease would have ended
	is.True(e.row(r.ID).LeaseUntil.Equal(at(22 * time.Second)))   // moved again

	got := e.row(r.ID)
	is.Equal(got.Status, turnframe.OutboxDispatching) // still dispatching
	is.Equal(got.Attempts, 1)                         // the same attempt
	is.Equal(got.ClaimedBy, worker)                   // the same worker
	ids, err := e.s.ExpireClaims(e.ctx, at(21*time.Second))
	is.NoErr(err)                                                                // expire
	is.Equal(len(ids), 0)                                                        // the extended lease still runs
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "ch_1", at(21*time.Second))) // the claim still settles

	results, err := e.s.ExtendClaims(e.ctx, nil, at(22*time.Second), lease)
	is.NoErr(err)             // an empty list
	is.Equal(len(results), 0) // no results
}

func testExtendLost(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message(""), message(""), message(""), message(""))
	cs := e.claim(at(time.Second), 10, worker)
	is.Equal(len(cs), 4)                                                                               // all claimed
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[0], "ch_1", at(2*time.Second)))                    // settled
	is.NoErr(e.s.ReleaseClaim(e.ctx, cs[2].ID, 0, at(2*time.Second)))                                  // released, then
	is.Equal(claimedIDs(e.claim(at(2*time.Second), 10, "worker-2")), []turnframe.OutboxID{rows[2].ID}) // re-claimed by another worker
	is.NoErr(e.s.ReleaseClaim(e.ctx, cs[1].ID, 0, at(2*time.Second)))                                  // released, not re-claimed
	lost := []turnframe.OutboxID{rows[0].ID, rows[1].ID, rows[2].ID}
	before := make(map[turnframe.OutboxID]turnframe.OutboxRecord)
	for _, id := range lost {
		before[id] = e.row(id)
	}

	results, err := e.s.ExtendClaims(e.ctx, cs, at(3*time.Second), time.Minute)
	is.NoErr(err)                                          // the call as a whole
	is.Equal(len(results), 4)                              // one result per claim
	is.True(errors.Is(results[0], turnframe.ErrClaimLost)) // settled
	is.True(errors.Is(results[1], turnframe.ErrClaimLost)) // released
	is.True(errors.Is(results[2], turnframe.ErrClaimLost)) // re-claimed by another worker
	is.NoErr(results[3])                                   // still held: extended
	for _, id := range lost {
		is.True(reflect.DeepEqual(e.row(id), before[id])) // a lost claim changes nothing
	}
	is.True(e.row(rows[3].ID).LeaseUntil.Equal(at(3*time.Second + time.Minute))) // the held one is extended
}

func testReleaseClaim(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.True(c.LeaseUntil.After(at(2 * time.Second))) // the lease runs past the release

	is.NoErr(e.s.ReleaseClaim(e.ctx, r.ID, 0, at(2*time.Second))) // force-released
	got := e.row(r.ID)
	is.Equal(got.Status, turnframe.OutboxPending)     // pending
	is.True(got.LeaseUntil.IsZero())                  // no lease
	is.True(got.DueAt.Equal(at(0)))                   // due time kept
	is.Equal(got.Attempts, 1)                         // attempts kept
	is.True(got.UpdatedAt.Equal(at(2 * time.Second))) // updated at the release
	again := e.claimOne(at(2*time.Second), "worker-2")
	is.Equal(again.ID, r.ID)    // claimable again at once
	is.Equal(again.Attempts, 2) // a new attempt: the old claim's fence never repeats
}

func testSettleAfterRelease(t *testing.T, e *env) {
	releases := []struct {
		name    string
		release func(e *env, c turnframe.Claim) error
	}{
		{"Expired", func(e *env, c turnframe.Claim) error {
			_, err := e.s.ExpireClaims(e.ctx, c.LeaseUntil)
			return err
		}},
		{"Forced", func(e *env, c turnframe.Claim) error { return e.s.ReleaseClaim(e.ctx, c.ID, 0, c.ClaimedAt) }},
	}
	for _, rel := range releases {
		for _, k := range settleKinds {
			t.Run(rel.name+"_"+k.name, func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				e.enqueue(acme, at(0), message(""))
				c := e.claimOne(at(time.Second), worker)
				is.NoErr(rel.release(e, c)) // expired or released, not re-claimed
				e.refusedOp("settle after a release", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, c, c.LeaseUntil.Add(time.Second)) })
			})
		}
	}
}

func testLeaseEndedStillHeld(t *testing.T, e *env) {
	for _, k := range settleKinds {
		t.Run("settle_"+k.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r := e.enqueue(acme, at(0), message(""))[0]
			c := e.claimOne(at(time.Second), worker)
			late := c.LeaseUntil.Add(time.Hour) // nobody expired or released it meanwhile
			is.NoErr(e.settleClaim(k, c, late)) // the claim settles
			is.Equal(e.row(r.ID).Status, k.to)  // settled
		})
	}
	t.Run("extend", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, e.open)
		r := e.enqueue(acme, at(0), message(""))[0]
		c := e.claimOne(at(time.Second), worker)
		late := c.LeaseUntil.Add(time.Hour)
		is.NoErr(extendOne(e, c, late, lease))                 // the lease is extended
		is.True(e.row(r.ID).LeaseUntil.Equal(late.Add(lease))) // from now
	})
}

// ExtendClaims moves the lease to now + lease, to the microsecond (every
// time a store takes reads back as itself, truncated to the microsecond,
// DESIGN.md §3): an extension a microsecond later than the lease is an
// extension, not "already runs that long".
func testExtendMicrosecond(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker) // until 11s
	is.NoErr(extendOne(e, c, at(time.Second+time.Microsecond), 10*time.Second))
	is.True(e.row(r.ID).LeaseUntil.Equal(at(11*time.Second + time.Microsecond))) // one microsecond later
	is.NoErr(extendOne(e, c, at(time.Second+time.Millisecond), 10*time.Second))
	is.True(e.row(r.ID).LeaseUntil.Equal(at(11*time.Second + time.Millisecond))) // and a millisecond
}
