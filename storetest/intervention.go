package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// The journal's rules for uncertain outcomes (issue 13): a reconciliation
// declares an attempt that died unknown once its lease ended, in any phase;
// it escalates an unknown entry to NeedsIntervention; and only the app or a
// person (an actor that MayIntervene) moves an entry on from there.

func interventionTests() []test {
	return []test{
		{"AReconciliationDeclaresAnExecutingEntryUnknownOnceItsLeaseEndedInAnyPhase", testDeclareUnknown},
		{"AReconciliationCannotDeclareAnEntryUnknownWhileItsLeaseRuns", testDeclareUnknownLive},
		{"AReconciliationOfADeadAttemptThatWasTakenOverSinceIsConflictAndChangesNothing", testDeclareUnknownStalePrior},
		{"AReconciliationEscalatesAnUnknownEntryToNeedsInterventionKeepingTheRemotesReference", testEscalateEntry},
		{"ANeedsInterventionEntryIsSettledByAnActorThatMayIntervene", testInterveneAllowed},
		{"ANeedsInterventionEntryRefusesRecoveryThePolicyAndWorkersAndChangesNothing", testInterveneRefused},
		{"ANeedsInterventionEntryIsMovedOnlyByAReconciliationNeverByAnAttempt", testInterveneNoAttempt},
		{"ANeedsInterventionEntryOfAnAbandonedTurnIsNotResentButStillSettles", testInterveneAbandoned},
		{"AReconciliationToCommittedKeepsItsRemoteReference", testReconcileRemoteRef},
		{"ListUnfinishedTurnsIncludesADeliveredTurnHoldingANeedsInterventionEntry", testUnfinishedIncludesIntervention},
	}
}

// The actors that may, and may not, move an entry or a row out of
// NeedsIntervention ("" is the app).
var (
	intervening    = []turnframe.Actor{"", turnframe.ActorApp, turnframe.ActorOperator, "app:x", "operator:alice"}
	notIntervening = []turnframe.Actor{turnframe.ActorPolicy, turnframe.ActorRecovery, "worker:w"}
)

// actorName names an actor in a subtest name.
func actorName(a turnframe.Actor) string {
	if a == "" {
		return "no_actor"
	}
	return string(a)
}

// reconcile applies the Write by which actor moves the entry under key to
// to, as a reconciliation (no attempt), at now; it must succeed.
func (e *env) reconcile(turn turnframe.TurnID, key turnframe.IdempotencyKey, s turnframe.Settlement, actor turnframe.Actor, now time.Time) turnframe.JournalEntry {
	e.t.Helper()
	a := e.apply(turnframe.Write{Account: acme, Turn: turn, Now: now, Actor: actor, Settle: []turnframe.Settlement{s}})
	return a.Settled[0]
}

// runningIn begins a turn, admits a command and starts it at at(0) under
// lease, then moves the turn to phase p: the turn, the key, the attempt.
func (e *env) runningIn(p turnframe.TurnPhase) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID) {
	e.t.Helper()
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	if p != turnframe.PhaseReceived {
		e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Phase: p})
	}
	return turn, key, attempt
}

// runningPhases are the phases a turn holding an Executing entry may be in.
var runningPhases = []turnframe.TurnPhase{turnframe.PhaseReceived, turnframe.PhasePlanned, turnframe.PhaseExecuting, turnframe.PhaseAbandoned}

func testDeclareUnknown(t *testing.T, e *env) {
	for _, p := range runningPhases {
		for _, after := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%v_%v_after", p, after), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				turn, key, attempt := e.runningIn(p)
				before := e.entry(acme, key)
				now := before.LeaseUntil.Add(after)
				s := turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}
				got := e.reconcile(turn, key, s, turnframe.ActorRecovery, now)
				want, err := storekit.NextEntry(before, s, nil, p, turnframe.ActorRecovery, now)
				is.NoErr(err)                                          // the rule allows it
				is.True(sameEntry(got, want))                          // applied as the rule says
				is.True(sameEntry(e.entry(acme, key), want))           // and stored so
				is.Equal(got.Status, turnframe.JournalOutcomeUnknown)  // unknown: never run again blindly
				is.Equal(got.Code, turnframe.CodeLeaseEnded)           // with its code
				is.Equal(got.Attempt, attempt)                         // the attempt that ran
				is.True(got.LeaseUntil.IsZero())                       // no lease
				is.Equal(e.phase(acme, turn), p)                       // the phase stays
				is.Equal(e.entry(acme, key).Attempts, before.Attempts) // not an attempt
			})
		}
	}
}

func testDeclareUnknownLive(t *testing.T, e *env) {
	for _, p := range runningPhases {
		t.Run(p.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, _ := e.runningIn(p)
			end := e.entry(acme, key).LeaseUntil
			for _, now := range []time.Time{at(time.Second), end.Add(-time.Microsecond)} {
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: now, Actor: turnframe.ActorRecovery,
					Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}}},
					turnframe.ErrConflict, "declare a running attempt unknown")
			}
			is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // still running
		})
	}
}

// testDeclareUnknownStalePrior: a reconciliation names the attempt it saw
// die (Prior); when another attempt took the entry over since, and its lease
// ended too, the reconciliation is about an attempt that is no longer the
// entry's, and is refused — whether it declares it unknown or, on an
// abandoned turn, settles it. The one naming the current attempt lands.
func testDeclareUnknownStalePrior(t *testing.T, e *env) {
	for _, tc := range []struct {
		phase turnframe.TurnPhase
		to    turnframe.JournalStatus
	}{
		{turnframe.PhaseExecuting, turnframe.JournalOutcomeUnknown},
		{turnframe.PhaseAbandoned, turnframe.JournalOutcomeUnknown},
		{turnframe.PhaseAbandoned, turnframe.JournalCommitted},
		{turnframe.PhaseAbandoned, turnframe.JournalRejected},
	} {
		t.Run(fmt.Sprintf("%v_to_%v", tc.phase, tc.to), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, first := e.running(acme, "booking/1", at(0)) // leased until at(lease)
			second := e.execute(acme, turn, key, at(lease))         // took over once it ended, leased until at(2*lease)
			e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(lease), Phase: tc.phase})
			now := at(3 * lease) // the second attempt's lease ended too
			stale := turnframe.Settlement{Key: key, To: tc.to, Code: turnframe.CodeLeaseEnded, Prior: first}
			e.refused(turnframe.Write{Account: acme, Turn: turn, Now: now, Actor: turnframe.ActorRecovery, Settle: []turnframe.Settlement{stale}},
				turnframe.ErrConflict, "a reconciliation of the attempt taken over")
			is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // still the second attempt's
			is.Equal(e.entry(acme, key).Attempt, second)
			current := stale
			current.Prior = second
			got := e.reconcile(turn, key, current, turnframe.ActorRecovery, now)
			is.Equal(got.Status, tc.to)   // the reconciliation that saw the current attempt lands
			is.Equal(got.Attempt, second) // about the second attempt
		})
	}
}

func testEscalateEntry(t *testing.T, e *env) {
	for _, tc := range []struct {
		name, ref, want string
	}{
		{"WithoutAReference", "", "ref-1"}, // entryIn left "ref-1"
		{"WithANewReference", "ref-9", "ref-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, _ := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
			before := e.entry(acme, key)
			s := turnframe.Settlement{Key: key, To: turnframe.JournalNeedsIntervention, Code: "policy.unsure", RemoteRef: tc.ref}
			got := e.reconcile(turn, key, s, turnframe.ActorPolicy, at(time.Second))
			want, err := storekit.NextEntry(before, s, nil, turnframe.PhaseReceived, turnframe.ActorPolicy, at(time.Second))
			is.NoErr(err)                                            // the rule allows it
			is.True(sameEntry(got, want))                            // applied as the rule says
			is.Equal(got.Status, turnframe.JournalNeedsIntervention) // escalated
			is.Equal(got.Code, "policy.unsure")                      // with its code
			is.Equal(got.RemoteRef, tc.want)                         // what the remote said is kept
			is.True(sameEntry(e.entry(acme, key), got))              // as stored
		})
	}
}

func testInterveneAllowed(t *testing.T, e *env) {
	for _, to := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending} {
		for _, actor := range intervening {
			t.Run(fmt.Sprintf("%v_by_%s", to, actorName(actor)), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				turn, key, _ := e.entryIn(acme, turnframe.JournalNeedsIntervention, at(0))
				before := e.entry(acme, key)
				s := turnframe.Settlement{Key: key, To: to, Code: "checked", RemoteRef: "ch_7"}
				if to == turnframe.JournalRejected {
					s.RemoteRef = ""
				}
				got := e.reconcile(turn, key, s, actor, at(time.Second))
				want, err := storekit.NextEntry(before, s, nil, turnframe.PhaseReceived, actor, at(time.Second))
				is.NoErr(err)                               // the rule allows it
				is.True(sameEntry(got, want))               // applied as the rule says
				is.Equal(got.Status, to)                    // moved
				is.True(sameEntry(e.entry(acme, key), got)) // as stored
			})
		}
	}
}

func testInterveneRefused(t *testing.T, e *env) {
	for _, to := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending} {
		for _, actor := range notIntervening {
			t.Run(fmt.Sprintf("%v_by_%s", to, actorName(actor)), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				turn, key, _ := e.entryIn(acme, turnframe.JournalNeedsIntervention, at(0))
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Actor: actor, Note: "tried",
					Admit:  []turnframe.Command{command(e.freshKey(), "booking/2")},
					Settle: []turnframe.Settlement{{Key: key, To: to, Code: "checked"}}}, turnframe.ErrConflict, "settle an entry that needs intervention as "+string(actor))
				is.Equal(e.entry(acme, key).Status, turnframe.JournalNeedsIntervention) // still waiting for a person
			})
		}
	}
}

func testInterveneNoAttempt(t *testing.T, e *env) {
	for _, to := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending} {
		t.Run(to.String(), func(t *testing.T) {
			e := newEnv(t, e.open)
			turn, key, ran := e.entryIn(acme, turnframe.JournalNeedsIntervention, at(0))
			for _, attempt := range []turnframe.AttemptID{ran, e.ids.AttemptID(at(0))} {
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Actor: turnframe.ActorOperator,
					Settle: []turnframe.Settlement{{Key: key, To: to, Attempt: attempt}}}, turnframe.ErrConflict, "settle an entry that needs intervention with an attempt")
			}
		})
	}
}

func testInterveneAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalNeedsIntervention, at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	listed := func() int {
		t.Helper()
		ms, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{}, 10)
		is.NoErr(err) // list
		return len(ms)
	}
	is.Equal(listed(), 1) // an abandoned turn holding an effect nobody settled is unfinished
	e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Second), Actor: turnframe.ActorOperator,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalPending}}}, turnframe.ErrConflict, "resend on an abandoned turn")
	got := e.reconcile(turn, key, turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Code: "never_arrived"}, turnframe.ActorOperator, at(2*time.Second))
	is.Equal(got.Status, turnframe.JournalRejected) // a settlement that sends nothing lands
	is.Equal(listed(), 0)                           // and the turn is finished
}

func testReconcileRemoteRef(t *testing.T, e *env) {
	for _, from := range []turnframe.JournalStatus{turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention} {
		t.Run(from.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, _ := e.entryIn(acme, from, at(0))
			got := e.reconcile(turn, key, turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, RemoteRef: "ch_42"}, turnframe.ActorOperator, at(time.Second))
			is.Equal(got.RemoteRef, "ch_42")                    // the remote's reference, as the reconciliation found it
			is.Equal(e.entry(acme, key).RemoteRef, "ch_42")     // as stored
			is.Equal(got.Status, turnframe.JournalCommitted)    // committed
			is.Equal(len(e.entry(acme, key).EventIDs), 0)       // with no events of its own
			is.Equal(e.entry(acme, key).Attempts, got.Attempts) // not an attempt
		})
	}
}

func testUnfinishedIncludesIntervention(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalNeedsIntervention, at(0))
	a := e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseDelivered})
	is.Equal(a.Phase, turnframe.PhaseDelivered) // an entry that needs intervention does not hold the turn back
	e.turnIn(acme, turnframe.PhaseDelivered, at(time.Second))

	list := func() []turnframe.TurnID {
		t.Helper()
		ms, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{}, 10)
		is.NoErr(err) // list
		var ids []turnframe.TurnID
		for _, m := range ms {
			ids = append(ids, m.Turn)
		}
		return ids
	}
	is.Equal(list(), []turnframe.TurnID{turn}) // the delivered turn still has an unsettled effect

	e.reconcile(turn, key, turnframe.Settlement{Key: key, To: turnframe.JournalCommitted}, turnframe.ActorOperator, at(2*time.Second))
	is.Equal(len(list()), 0) // settled by a person, it is finished
}
