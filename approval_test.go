package turnframe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// apNow is the rules' clock: a fixed instant.
var apNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// apPay is the command that needs approval in these tests: rtScript
// commits a "book".
func apPay(key turnframe.IdempotencyKey) turnframe.Command {
	c := rtCmd(key, "card/1", "book")
	c.NeedsApproval = true
	return c
}

// apRecorder is a RecoveryHandler that records the action each turn got
// and resumes commands through rt and h.
type apRecorder struct {
	rt      *turnframe.Runtime
	h       turnframe.Handler
	actions []turnframe.ActionKind
}

func (r *apRecorder) RestartInterpretation(_ context.Context, _ turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	r.actions = append(r.actions, a.Kind)
	return nil
}

func (r *apRecorder) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	r.actions = append(r.actions, a.Kind)
	_, err := r.rt.Execute(ctx, m.Account, m.Turn, r.h)
	return err
}

func (r *apRecorder) RegenerateResponse(_ context.Context, _ turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	r.actions = append(r.actions, a.Kind)
	return nil
}

func TestApprovalRuntime(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		ctx := context.Background()
		rt := turnframe.New(store)
		h := rtNewHandler(rtScript)
		turn := rtPlanned(t, rt, rtAccount, apPay("k-pay"), rtCmd("k-book", "seat/1", "book"))

		t.Run("PlanAdmitsItAwaitingApproval", func(t *testing.T) {
			is := is.New(t)
			e := rtEntry(t, store, "k-pay")
			is.Equal(e.Status, turnframe.JournalAwaitingApproval) // awaiting
			is.True(e.NeedsApproval)
		})
		t.Run("ExecuteSkipsItAndRunsTheOthers", func(t *testing.T) {
			is := is.New(t)
			report, err := rt.Execute(ctx, rtAccount, turn, h)
			is.NoErr(err)
			is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultAwaitingApproval, turnframe.ResultCommitted})
			is.Equal(report.Results[0].Status, turnframe.JournalAwaitingApproval) // reported as it stands
			is.True(!report.Results[0].Ran)
			is.Equal(h.callsOf("k-pay"), 0)                  // never run
			is.Equal(report.Phase, turnframe.PhaseCommitted) // an awaiting entry holds no phase back
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "booked; the payment waits for your approval"))
		})
		t.Run("ApproveThenExecuteRunsItOnTheDeliveredTurn", func(t *testing.T) {
			is := is.New(t)
			e, err := rt.Approve(ctx, rtAccount, "k-pay", "operator:alice", "fine")
			is.NoErr(err)
			is.Equal(e.Status, turnframe.JournalPending) // approved
			is.Equal(e.Code, turnframe.CodeApproved)
			is.Equal(e.Turn, turn) // names the turn to execute
			report, err := rt.Execute(ctx, rtAccount, e.Turn, h)
			is.NoErr(err)
			is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultCommitted, turnframe.ResultSkipped})
			is.Equal(h.callsOf("k-pay"), 1)                             // run once
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseDelivered) // the phase stays
			is.Equal(histLines(t, store, turnframe.JournalSubject(rtAccount, "k-pay")), []string{
				">awaiting_approval app",
				"awaiting_approval>pending operator:alice turnframe.approval.approved",
				"pending>executing app",
				"executing>committed app",
			})
			last := histOf(t, store, turnframe.JournalSubject(rtAccount, "k-pay"))[1]
			is.Equal(last.Note, "fine") // the approver's note
		})
		t.Run("ApprovingAgainIsAConflict", func(t *testing.T) {
			is := is.New(t)
			_, err := rt.Approve(ctx, rtAccount, "k-pay", "", "")
			is.True(errors.Is(err, turnframe.ErrConflict)) // committed, not awaiting
			_, err = rt.Deny(ctx, rtAccount, "k-book", "", "")
			is.True(errors.Is(err, turnframe.ErrConflict)) // never needed approval
		})
	})
}

func TestDenyRejectsWithTheStableCode(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		h := rtNewHandler(rtScript)
		turn := rtPlanned(t, rt, rtAccount, apPay("k-pay"))
		e, err := rt.Deny(ctx, rtAccount, "k-pay", "", "too much")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalRejected) // denied is a reject
		is.Equal(e.Code, turnframe.CodeDenied)        // with the stable code
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultSkipped})
		is.Equal(h.callsOf("k-pay"), 0) // never run
		is.Equal(histLast(t, store, turnframe.JournalSubject(rtAccount, "k-pay")), "awaiting_approval>rejected app turnframe.approval.denied")
		_, err = rt.Approve(ctx, rtAccount, "k-pay", "", "")
		is.True(errors.Is(err, turnframe.ErrConflict)) // decided once
	})
}

func TestApprovalErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		ctx := context.Background()
		rt := turnframe.New(store)
		turn := rtPlanned(t, rt, rtAccount, apPay("k-pay"))
		for _, tc := range []struct {
			name    string
			account turnframe.AccountID
			key     turnframe.IdempotencyKey
			actor   turnframe.Actor
			note    string
			want    error
		}{
			{"NoSuchKey", rtAccount, "k-none", "", "", turnframe.ErrNotFound},
			{"AnotherTenantsKey", rtOther, "k-pay", "", "", turnframe.ErrNotFound},
			{"BadKey", rtAccount, "", "", "", turnframe.ErrInvalid},
			{"BadAccount", "", "k-pay", "", "", turnframe.ErrInvalid},
			{"ThePolicy", rtAccount, "k-pay", turnframe.ActorPolicy, "", turnframe.ErrInvalid},
			{"AWorker", rtAccount, "k-pay", "worker:w1", "", turnframe.ErrInvalid},
			{"ALongNote", rtAccount, "k-pay", "", strings.Repeat("n", turnframe.MaxNoteLen+1), turnframe.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				_, err := rt.Approve(ctx, tc.account, tc.key, tc.actor, tc.note)
				is.True(errors.Is(err, tc.want)) // approve
				_, err = rt.Deny(ctx, tc.account, tc.key, tc.actor, tc.note)
				is.True(errors.Is(err, tc.want))                                               // deny
				is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval) // unchanged
			})
		}
		t.Run("AnAbandonedTurnIsDeniedNotApproved", func(t *testing.T) {
			is := is.New(t)
			is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
			_, err := rt.Approve(ctx, rtAccount, "k-pay", "", "")
			is.True(errors.Is(err, turnframe.ErrConflict)) // it would never run
			e, err := rt.Deny(ctx, rtAccount, "k-pay", "", "")
			is.NoErr(err)
			is.Equal(e.Status, turnframe.JournalRejected)
		})
	})
}

// Recovery lists what waits for approval, never runs or rejects it, and
// resumes it once approved.
func TestRecoverListsAwaitingApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		ctx := context.Background()
		rt := turnframe.New(store)
		h := rtNewHandler(rtScript)
		rec := turnframe.NewRecovery(store)
		turn := rtPlanned(t, rt, rtAccount, apPay("k-pay"))
		recover := func(t *testing.T) (turnframe.RecoverReport, []turnframe.ActionKind) {
			t.Helper()
			r := &apRecorder{rt: rt, h: h}
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, r)
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			return report, r.actions
		}
		keys := func(es []turnframe.JournalEntry) []turnframe.IdempotencyKey {
			var out []turnframe.IdempotencyKey
			for _, e := range es {
				out = append(out, e.Key)
			}
			return out
		}
		t.Run("APlannedTurnIsAnsweredAndListed", func(t *testing.T) {
			is := is.New(t)
			report, actions := recover(t)
			is.Equal(keys(report.AwaitingApproval), []turnframe.IdempotencyKey{"k-pay"})   // listed
			is.Equal(actions, []turnframe.ActionKind{turnframe.ActionRegenerateResponse})  // its answer can say it waits
			is.Equal(h.callsOf("k-pay"), 0)                                                // never run
			is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval) // nor rejected
		})
		t.Run("ADeliveredTurnIsListedAndLeftAlone", func(t *testing.T) {
			is := is.New(t)
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "it waits for your approval"))
			report, actions := recover(t)
			is.Equal(keys(report.AwaitingApproval), []turnframe.IdempotencyKey{"k-pay"}) // still listed
			is.Equal(len(actions), 0)                                                    // nothing handed to the handler
			is.Equal(report.Turns.Actions[turnframe.ActionNothing], 1)                   // decided: nothing to do, not stranded
			is.Equal(len(report.Turns.Failures), 0)
			is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval)
		})
		t.Run("OnceApprovedRecoveryResumesIt", func(t *testing.T) {
			is := is.New(t)
			_, err := rt.Approve(ctx, rtAccount, "k-pay", "operator:bob", "")
			is.NoErr(err)
			report, actions := recover(t)
			is.Equal(len(report.AwaitingApproval), 0)
			is.Equal(actions, []turnframe.ActionKind{turnframe.ActionResumeCommands}) // a crash after the approval loses nothing
			is.Equal(h.callsOf("k-pay"), 1)
			is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalCommitted)
		})
	})
}

// The rules approval adds to transition.go, as pure functions.
func TestApprovalRules(t *testing.T) {
	t.Run("UnfinishedHoldsADeliveredTurnThatAwaitsAndNoAbandonedOne", func(t *testing.T) {
		for _, tc := range []struct {
			phase turnframe.TurnPhase
			want  bool
		}{
			{turnframe.PhasePlanned, true},
			{turnframe.PhaseCommitted, true},
			{turnframe.PhaseDelivered, true},
			{turnframe.PhaseAbandoned, false},
		} {
			t.Run(tc.phase.String(), func(t *testing.T) {
				is := is.New(t)
				is.Equal(turnframe.Unfinished(tc.phase, false, false, false, true), tc.want)
			})
		}
		is := is.New(t)
		is.True(!turnframe.Unfinished(turnframe.PhaseDelivered, false, false, false, false)) // nothing waits: finished
	})
	t.Run("NewEntryAwaitsOnlyWhatNeedsApproval", func(t *testing.T) {
		is := is.New(t)
		turn := turnframe.NewIDGenerator().TurnID(apNow)
		is.Equal(storekit.NewEntry(rtAccount, turn, apPay("k"), apNow).Status, turnframe.JournalAwaitingApproval)
		is.Equal(storekit.NewEntry(rtAccount, turn, rtCmd("k", "c", "book"), apNow).Status, turnframe.JournalPending)
	})
	t.Run("AnAbandonedTurnsAwaitingEntryIsAdoptedStillAwaiting", func(t *testing.T) {
		is := is.New(t)
		ids := turnframe.NewIDGenerator()
		old, next := ids.TurnID(apNow), ids.TurnID(apNow)
		e := storekit.NewEntry(rtAccount, old, apPay("k"), apNow)
		got, adopt, err := storekit.Readmit(e, turnframe.PhaseAbandoned, apPay("k"), next, apNow)
		is.NoErr(err)
		is.True(adopt)
		is.Equal(got.Turn, next)
		is.Equal(got.Status, turnframe.JournalAwaitingApproval)
		_, _, err = storekit.Readmit(e, turnframe.PhasePlanned, rtCmd("k", "card/1", "book"), next, apNow)
		is.True(errors.Is(err, turnframe.ErrConflict)) // another approval requirement is another command
	})
}
