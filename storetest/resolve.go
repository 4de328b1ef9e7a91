package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// The rules of Resolve (issue 13): an OutcomeUnknown row moves by any
// verdict, escalation included; a NeedsIntervention row by any verdict but
// escalation, and only for an actor that MayIntervene; a refused resolution
// changes nothing. A NeedsIntervention row holds its order key.

func resolveTests() []test {
	return []test{
		{"ResolveMovesAnUnknownRowByEveryVerdict", testResolveUnknown},
		{"ResolveMovesANeedsInterventionRowForAnActorThatMayIntervene", testResolveIntervention},
		{"ResolveRefusesANeedsInterventionRowToRecoveryThePolicyAndWorkersAndChangesNothing", testResolveInterventionRefused},
		{"ResolveRefusesToEscalateARowThatNeedsInterventionAndChangesNothing", testResolveEscalateAgain},
		{"ResolveOfARowThatDoesNotExistIsNotFound", testResolveMissing},
		{"ANeedsInterventionRowIsNeverClaimedAndHoldsItsOrderKeyUntilResolved", testInterventionHoldsOrder},
	}
}

// resolution returns a resolution of id by v, as actor, with a code, a
// reference and a note, at now.
func resolution(id turnframe.OutboxID, v turnframe.Verdict, actor turnframe.Actor, now time.Time) turnframe.Resolution {
	return turnframe.Resolution{ID: id, Verdict: v, Code: "verdict." + v.String(), RemoteRef: "ref-" + v.String(),
		Actor: actor, Note: "looked it up", Now: now}
}

// resolved resolves the row r by res and checks that it is stored as
// storekit.ResolveRow says.
func (e *env) resolved(is *is.I, r turnframe.OutboxRecord, res turnframe.Resolution) turnframe.OutboxRecord {
	e.t.Helper()
	is.NoErr(e.s.Resolve(e.ctx, res)) // resolved
	got := e.row(r.ID)
	want, err := storekit.ResolveRow(r, res)
	is.NoErr(err)                  // the rule allows it
	is.True(sameRecord(got, want)) // stored as the rule says
	return got
}

func testResolveUnknown(t *testing.T, e *env) {
	want := map[turnframe.Verdict]turnframe.OutboxStatus{
		turnframe.VerdictCompleted: turnframe.OutboxCompleted,
		turnframe.VerdictFailed:    turnframe.OutboxFailed,
		turnframe.VerdictResend:    turnframe.OutboxPending,
		turnframe.VerdictEscalate:  turnframe.OutboxNeedsIntervention,
	}
	for _, v := range allVerdicts {
		for _, actor := range []turnframe.Actor{"", turnframe.ActorPolicy, turnframe.ActorRecovery, turnframe.ActorOperator} {
			for _, ref := range []string{"", "ch_9"} {
				t.Run(fmt.Sprintf("%v_by_%s_ref_%q", v, actorName(actor), ref), func(t *testing.T) {
					is := is.New(t)
					e := newEnv(t, e.open)
					entry, _ := e.rowIn(turnframe.OutboxOutcomeUnknown, false)
					before := e.row(entry.ID)
					res := resolution(entry.ID, v, actor, at(3*time.Second))
					res.RemoteRef = ref
					got := e.resolved(is, before, res)
					is.Equal(got.Status, want[v])           // moved by the verdict
					is.Equal(got.LastCode, res.Code)        // its code
					is.True(got.UpdatedAt.Equal(res.Now))   // updated at the resolution
					is.Equal(got.Attempts, before.Attempts) // not an attempt
					if ref == "" {
						is.Equal(got.RemoteRef, "ref") // what the remote said before is kept
					} else {
						is.Equal(got.RemoteRef, ref) // the resolution's reference
					}
				})
			}
		}
	}
}

func testResolveIntervention(t *testing.T, e *env) {
	for _, v := range []turnframe.Verdict{turnframe.VerdictCompleted, turnframe.VerdictFailed, turnframe.VerdictResend} {
		for _, actor := range intervening {
			t.Run(fmt.Sprintf("%v_by_%s", v, actorName(actor)), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				entry, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
				before := e.row(entry.ID)
				got := e.resolved(is, before, resolution(entry.ID, v, actor, at(3*time.Second)))
				is.True(got.Status != turnframe.OutboxNeedsIntervention) // settled by a person
				is.Equal(got.RemoteRef, "ref-"+v.String())               // with the reference they give
			})
		}
	}
}

func testResolveInterventionRefused(t *testing.T, e *env) {
	for _, v := range allVerdicts {
		for _, actor := range notIntervening {
			t.Run(fmt.Sprintf("%v_by_%s", v, actorName(actor)), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				entry, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
				e.refusedOp("resolve as "+string(actor), turnframe.ErrConflict, func() error {
					return e.s.Resolve(e.ctx, resolution(entry.ID, v, actor, at(3*time.Second)))
				})
				is.Equal(e.row(entry.ID).Status, turnframe.OutboxNeedsIntervention) // still waiting for a person
			})
		}
	}
}

func testResolveEscalateAgain(t *testing.T, e *env) {
	for _, actor := range append(intervening, notIntervening...) {
		t.Run(actorName(actor), func(t *testing.T) {
			e := newEnv(t, e.open)
			entry, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
			e.refusedOp("escalate again", turnframe.ErrConflict, func() error {
				return e.s.Resolve(e.ctx, resolution(entry.ID, turnframe.VerdictEscalate, actor, at(3*time.Second)))
			})
		})
	}
}

func testResolveMissing(t *testing.T, e *env) {
	is := is.New(t)
	for _, v := range allVerdicts {
		err := e.s.Resolve(e.ctx, resolution(e.ids.OutboxID(at(0)), v, turnframe.ActorOperator, at(0)))
		is.True(errors.Is(err, turnframe.ErrNotFound)) // no such row
	}
	// A row resolved, then pruned.
	r, _ := e.rowIn(turnframe.OutboxOutcomeUnknown, false)
	is.NoErr(e.s.Resolve(e.ctx, resolution(r.ID, turnframe.VerdictCompleted, "", at(3*time.Second))))
	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)  // prune
	is.Equal(n, 1) // the row is gone
	err = e.s.Resolve(e.ctx, resolution(r.ID, turnframe.VerdictFailed, "", at(time.Hour)))
	is.True(errors.Is(err, turnframe.ErrNotFound)) // a pruned row
}

func testInterventionHoldsOrder(t *testing.T, e *env) {
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
			c := e.claimOne(at(time.Second), worker)
			is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "req-1", at(time.Second)))                                             // the head is unknown
			is.NoErr(e.s.Resolve(e.ctx, resolution(rows[0].ID, turnframe.VerdictEscalate, turnframe.ActorPolicy, at(2*time.Second)))) // then needs a person
			free := e.enqueue(acme, at(time.Minute), message(""))[0]
			other := e.enqueue(globex, at(time.Minute), message("k"))[0]

			before := e.snapshot()
			is.Equal(len(e.expire(at(24*time.Hour))), 0) // not a claim to expire
			e.unchanged(before, "expire")
			got := e.claim(at(24*time.Hour), 10, worker)
			is.Equal(claimedIDs(got), []turnframe.OutboxID{free.ID, other.ID}) // the key waits behind its head; rows without it, or another account's, go on
			listed, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Limit: 10})
			is.NoErr(err)                                                                                               // list those that need a person
			is.Equal(len(listed), 1)                                                                                    // one
			is.Equal(listed[0].ID, rows[0].ID)                                                                          // the head
			is.NoErr(e.s.Resolve(e.ctx, resolution(rows[0].ID, tc.verdict, turnframe.ActorOperator, at(25*time.Hour)))) // a person settles it
			got = e.claim(at(25*time.Hour), 10, worker)
			is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[tc.next].ID}) // the key moves on, in order
		})
	}
}
