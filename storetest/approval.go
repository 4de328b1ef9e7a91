package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// Approval (issue 14, point 5): a command that NeedsApproval is admitted
// AwaitingApproval; only an approval (to Pending, CodeApproved) or a denial
// (to Rejected, CodeDenied) by an actor that MayIntervene moves it, each
// with a history record; it holds no phase back, and keeps a delivered turn
// unfinished until it is decided.

func approvalTests() []test {
	return []test{
		{"ACommandThatNeedsApprovalIsAdmittedAwaitingApprovalAndReadsBackAsAdmitted", testAdmitAwaiting},
		{"AnApprovalMovesAnAwaitingEntryToPendingWithAHistoryRecordOfItsActorAndNote", testApprove},
		{"ADenialRejectsAnAwaitingEntryWithCodeDeniedAndAHistoryRecord", testDeny},
		{"NothingButAnApprovalOrADenialMovesAnAwaitingEntry", testAwaitingRefusesOtherMoves},
		{"RecoveryThePolicyAndWorkersNeitherApproveNorDeny", testApprovalActors},
		{"AnEntryIsApprovedOrDeniedOnce", testApprovalOnce},
		{"ADecisionFencedOnTheStatusItReadLands", testApprovalFenced},
		{"AnAwaitingEntryHoldsNoPhaseBackAndKeepsADeliveredTurnUnfinishedUntilDecided", testAwaitingPhases},
		{"AnApprovedEntryOfADeliveredTurnRunsThereLeavingThePhase", testApprovedAfterDelivery},
		{"AnAwaitingEntryOfAnAbandonedTurnIsDeniedNotApprovedAndAdoptedStillAwaiting", testAwaitingAbandoned},
		{"AKeyReadmittedWithAnotherApprovalRequirementIsAConflict", testReadmitOtherApproval},
		{"AnAttemptsOwnSettlementCarryingADecisionsCodeLands", testAttemptWithDecisionCode},
	}
}

// awaitingCommand returns a command under key that needs approval.
func awaitingCommand(key turnframe.IdempotencyKey) turnframe.Command {
	c := command(key, "payment/1")
	c.NeedsApproval = true
	return c
}

// awaiting begins a turn of acme at now and admits one command that needs
// approval: the turn and the key.
func (e *env) awaiting(now time.Time) (turnframe.TurnID, turnframe.IdempotencyKey) {
	e.t.Helper()
	turn := e.begin(acme, now)
	key := e.freshKey()
	e.admit(acme, turn, now, awaitingCommand(key))
	return turn, key
}

// decide applies the approval (approve) or denial of key by actor with note.
func (e *env) decide(turn turnframe.TurnID, key turnframe.IdempotencyKey, approve bool, actor turnframe.Actor, note string, now time.Time) (turnframe.Applied, error) {
	return e.try(turnframe.Write{Account: acme, Turn: turn, Now: now, Actor: actor, Note: note,
		Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, approve)}})
}

// decision names an approval (true) or a denial in a subtest name.
func decision(approve bool) string {
	if approve {
		return "approve"
	}
	return "deny"
}

// unfinished returns the ids of acme's unfinished turns.
func (e *env) unfinished() []turnframe.TurnID {
	e.t.Helper()
	ms, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{Account: acme}, turnframe.MaxLimit)
	if err != nil {
		e.t.Fatalf("list unfinished turns: %v", err)
	}
	var ids []turnframe.TurnID
	for _, m := range ms {
		ids = append(ids, m.Turn)
	}
	return ids
}

func testAdmitAwaiting(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.begin(acme, at(0))
	waits, runs := e.freshKey(), e.freshKey()
	a := e.admit(acme, turn, at(time.Second), awaitingCommand(waits), command(runs, "booking/1"))
	want := storekit.NewEntry(acme, turn, awaitingCommand(waits), at(time.Second))
	is.Equal(want.Status, turnframe.JournalAwaitingApproval) // the rule admits it awaiting
	is.True(sameEntry(a.Admitted[0], want))                  // as the rule says
	is.True(sameEntry(e.entry(acme, waits), want))           // stored so
	is.True(e.entry(acme, waits).NeedsApproval)              // the requirement reads back
	is.Equal(e.entry(acme, runs).Status, turnframe.JournalPending)
	is.True(!e.entry(acme, runs).NeedsApproval) // a command that does not need it is pending
	entries := e.forTurn(acme, turn)
	is.Equal(len(entries), 2)
	is.True(sameEntry(entries[0], want)) // in admission order
	h := e.history(turnframe.JournalSubject(acme, waits))
	is.Equal(len(h), 1)
	is.Equal(h[0].From, "")                // admitted
	is.Equal(h[0].To, "awaiting_approval") // awaiting
	again := e.admit(acme, turn, at(2*time.Second), awaitingCommand(waits))
	is.True(sameEntry(again.Admitted[0], want)) // the same command again is the entry as it is
}

func testApprove(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	before := e.entry(acme, key)
	a, err := e.decide(turn, key, true, "operator:alice", "the payment is fine", at(time.Minute))
	is.NoErr(err) // approved
	want, err := storekit.NextEntry(before, turnframe.ApprovalSettlement(key, true), nil, turnframe.PhasePlanned, "operator:alice", at(time.Minute))
	is.NoErr(err)
	is.True(sameEntry(a.Settled[0], want))          // as the rule says
	is.True(sameEntry(e.entry(acme, key), want))    // stored so
	is.Equal(want.Status, turnframe.JournalPending) // pending: the next Execute runs it
	is.Equal(want.Code, turnframe.CodeApproved)
	is.True(want.NeedsApproval) // it needed approval, and still says so
	h := e.history(turnframe.JournalSubject(acme, key))
	is.Equal(len(h), 2)
	last := h[1]
	is.Equal(last.From, "awaiting_approval")
	is.Equal(last.To, "pending")
	is.Equal(last.Actor, turnframe.Actor("operator:alice")) // who approved
	is.Equal(last.Note, "the payment is fine")              // and why
	is.Equal(last.Code, turnframe.CodeApproved)
	is.True(last.At.Equal(at(time.Minute)))
	attempt := e.execute(acme, turn, key, at(2*time.Minute))
	c := e.commit(acme, turn, key, attempt, at(3*time.Minute), nil, nil)
	is.Equal(c.Settled[0].Status, turnframe.JournalCommitted) // and it runs like any other
}

func testDeny(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	a, err := e.decide(turn, key, false, "", "too expensive", at(time.Minute))
	is.NoErr(err) // denied
	got := a.Settled[0]
	is.True(sameEntry(got, e.entry(acme, key)))
	is.Equal(got.Status, turnframe.JournalRejected) // rejected: it never runs
	is.Equal(got.Code, turnframe.CodeDenied)        // with the stable code
	is.True(got.Attempt.IsZero())                   // it never ran
	is.Equal(got.Attempts, 0)
	h := e.history(turnframe.JournalSubject(acme, key))
	is.Equal(len(h), 2)
	is.Equal(h[1].From, "awaiting_approval")
	is.Equal(h[1].To, "rejected")
	is.Equal(h[1].Actor, turnframe.ActorApp) // "" is the app
	is.Equal(h[1].Note, "too expensive")
	is.Equal(h[1].Code, turnframe.CodeDenied)
}

func testAwaitingRefusesOtherMoves(t *testing.T, e *env) {
	attempt := func(e *env) turnframe.AttemptID { return e.ids.AttemptID(at(time.Minute)) }
	for _, tc := range []struct {
		name string
		s    func(e *env, key turnframe.IdempotencyKey) turnframe.Settlement
	}{
		{"TakenByAnAttempt", func(e *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return take(key, attempt(e), turnframe.AttemptID{})
		}},
		{"CommittedByAnAttempt", func(e *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Attempt: attempt(e)}
		}},
		{"ReconciledCommitted", func(_ *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalCommitted}
		}},
		{"DeclaredUnknown", func(_ *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}
		}},
		{"Escalated", func(_ *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalNeedsIntervention}
		}},
		{"ResentByAReconciliation", func(_ *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalPending, Code: "operator.resend"}
		}},
		{"RejectedWithAnotherCode", func(_ *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			return turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Code: "operator.failed"}
		}},
		{"ApprovedUnderAnAttempt", func(e *env, key turnframe.IdempotencyKey) turnframe.Settlement {
			s := turnframe.ApprovalSettlement(key, true)
			s.Attempt = attempt(e)
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key := e.awaiting(at(0))
			e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute), Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{tc.s(e, key)}}, turnframe.ErrConflict, tc.name)
			is.Equal(e.entry(acme, key).Status, turnframe.JournalAwaitingApproval) // still awaiting
		})
	}
}

func testApprovalActors(t *testing.T, e *env) {
	for _, actor := range notIntervening {
		for _, approve := range []bool{true, false} {
			t.Run(actorName(actor)+"_"+decision(approve), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				turn, key := e.awaiting(at(0))
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute), Actor: actor,
					Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, approve)}}, turnframe.ErrConflict, "decide as "+string(actor))
				is.Equal(e.entry(acme, key).Status, turnframe.JournalAwaitingApproval) // still awaiting
			})
		}
	}
	for _, actor := range intervening {
		t.Run(actorName(actor), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key := e.awaiting(at(0))
			_, err := e.decide(turn, key, true, actor, "", at(time.Minute))
			is.NoErr(err) // the app or a person approves
		})
	}
}

func testApprovalOnce(t *testing.T, e *env) {
	for _, first := range []bool{true, false} {
		for _, second := range []bool{true, false} {
			t.Run(decision(first)+"_then_"+decision(second), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				turn, key := e.awaiting(at(0))
				_, err := e.decide(turn, key, first, turnframe.ActorOperator, "", at(time.Minute))
				is.NoErr(err) // the first decision lands
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Minute), Actor: turnframe.ActorOperator,
					Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, second)}}, turnframe.ErrConflict, "decide again")
				is.Equal(len(e.history(turnframe.JournalSubject(acme, key))), 2) // one decision recorded
			})
		}
	}
	t.Run("ACommandThatNeverNeededIt", func(t *testing.T) {
		e := newEnv(t, e.open)
		turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute),
			Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, false)}}, turnframe.ErrConflict, "deny a pending entry")
	})
	// A decision read the entry awaiting; meanwhile another decided it and
	// the command ran, its outcome now unknown. The late decision, a
	// reconciliation by its shape, must not resend or reject that outcome.
	for _, status := range []turnframe.JournalStatus{turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention} {
		for _, late := range []bool{true, false} {
			t.Run("Late_"+decision(late)+"_of_an_entry_now_"+status.String(), func(t *testing.T) {
				e := newEnv(t, e.open)
				turn, key, _ := e.entryIn(acme, status, at(0))
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute), Actor: turnframe.ActorOperator,
					Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, late)}}, turnframe.ErrConflict, "decide late")
			})
		}
	}
}

// testApprovalFenced: a decision may carry Settlement.From, the status its
// caller read; while the entry still awaits approval, it lands.
func testApprovalFenced(t *testing.T, e *env) {
	for _, approve := range []bool{true, false} {
		t.Run(decision(approve), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key := e.awaiting(at(0))
			s := turnframe.ApprovalSettlement(key, approve)
			s.From = turnframe.JournalAwaitingApproval
			_, err := e.try(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute), Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{s}})
			is.NoErr(err) // fenced on the status it still is in
			is.True(e.entry(acme, key).Status != turnframe.JournalAwaitingApproval)
		})
	}
}

func testAwaitingPhases(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	a := e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseCommitted})
	is.Equal(a.Phase, turnframe.PhaseCommitted) // an awaiting entry is not pending
	is.Equal(e.unfinished(), []turnframe.TurnID{turn})
	a = e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Second), Phase: turnframe.PhaseDelivered})
	is.Equal(a.Phase, turnframe.PhaseDelivered)        // the answer can say it waits
	is.Equal(e.unfinished(), []turnframe.TurnID{turn}) // and the delivered turn stays unfinished while it waits
	_, err := e.decide(turn, key, false, turnframe.ActorOperator, "", at(time.Minute))
	is.NoErr(err)
	is.Equal(len(e.unfinished()), 0) // denied, the turn is finished
}

func testApprovedAfterDelivery(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseDelivered})
	_, err := e.decide(turn, key, true, turnframe.ActorOperator, "", at(time.Minute))
	is.NoErr(err)                                      // approved after the answer went out
	is.Equal(e.unfinished(), []turnframe.TurnID{turn}) // pending on a delivered turn: unfinished
	attempt := e.execute(acme, turn, key, at(2*time.Minute))
	e.commit(acme, turn, key, attempt, at(3*time.Minute), nil, nil)
	is.Equal(e.entry(acme, key).Status, turnframe.JournalCommitted) // it ran there
	is.Equal(e.phase(acme, turn), turnframe.PhaseDelivered)         // the phase stays
	is.Equal(len(e.unfinished()), 0)
}

func testAwaitingAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	is.Equal(len(e.unfinished()), 0) // an abandoned turn's awaiting entry never runs: not recovery's
	e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute), Actor: turnframe.ActorOperator,
		Settle: []turnframe.Settlement{turnframe.ApprovalSettlement(key, true)}}, turnframe.ErrConflict, "approve on an abandoned turn")

	next := e.begin(acme, at(2*time.Minute))
	a := e.admit(acme, next, at(2*time.Minute), awaitingCommand(key))
	is.Equal(a.Admitted[0].Turn, next)                                // adopted by the new turn
	is.Equal(a.Admitted[0].Status, turnframe.JournalAwaitingApproval) // still awaiting
	is.True(sameEntry(e.entry(acme, key), a.Admitted[0]))

	t.Run("ADenialLands", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, e.open)
		turn, key := e.awaiting(at(0))
		e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
		_, err := e.decide(turn, key, false, turnframe.ActorOperator, "", at(time.Minute))
		is.NoErr(err) // denied on an abandoned turn
		is.Equal(e.entry(acme, key).Status, turnframe.JournalRejected)
	})
}

func testReadmitOtherApproval(t *testing.T, e *env) {
	is := is.New(t)
	turn, key := e.awaiting(at(0))
	e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Admit: []turnframe.Command{command(key, "payment/1")}},
		turnframe.ErrConflict, "readmit without approval")
	turn2 := e.begin(acme, at(0))
	key2 := e.freshKey()
	e.admit(acme, turn2, at(0), command(key2, "payment/1"))
	e.refused(turnframe.Write{Account: acme, Turn: turn2, Now: at(time.Second), Admit: []turnframe.Command{awaitingCommand(key2)}},
		turnframe.ErrConflict, "readmit needing approval")
	is.Equal(e.entry(acme, key).Status, turnframe.JournalAwaitingApproval)
}

// testAttemptWithDecisionCode: only a settlement without an attempt that
// carries CodeApproved or CodeDenied is a decision. An attempt's own
// settlement — the holder rejecting its entry, a local attempt settling a
// Pending one — lands whatever its code, so no handler's answer leaves its
// entry running to run again.
func testAttemptWithDecisionCode(t *testing.T, e *env) {
	for _, code := range []string{turnframe.CodeDenied, turnframe.CodeApproved} {
		t.Run("TheHolder_"+code, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, attempt := e.entryIn(acme, turnframe.JournalExecuting, at(0))
			got := e.settle(acme, turn, at(time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Attempt: attempt, Code: code})
			is.Equal(got.Status, turnframe.JournalRejected)                // the holder's rejection landed
			is.Equal(e.entry(acme, key).Status, turnframe.JournalRejected) // as stored
		})
		t.Run("ALocalAttempt_"+code, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
			attempt := e.ids.AttemptID(at(time.Second))
			got := e.settle(acme, turn, at(time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Attempt: attempt, Code: code})
			is.Equal(got.Status, turnframe.JournalRejected) // the local attempt's rejection landed
			is.Equal(got.Attempt, attempt)
		})
	}
}
