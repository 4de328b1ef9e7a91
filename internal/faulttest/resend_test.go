package faulttest_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// TestResendOnDeliveredTurnSurvivesACrash closes a crash window of the
// recovery contract.
//
// A turn is delivered ("we are verifying your payment") while a command is
// outcome unknown. A person finds the remote never received it and settles
// it VerdictResend: Recovery.Settle puts the entry back to Pending. The
// process crashes before it calls Execute for that turn. After the
// restart, Recover must find the pending entry (a delivered turn holding
// a pending entry is unfinished) and resume it, or the intended effect is
// lost for good.
func TestResendOnDeliveredTurnSurvivesACrash(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			is := is.New(t)
			store := k.open(t)
			t.Cleanup(func() { store.Close() })
			dom := newDomain()
			a := newApp(store, dom, t0)
			is.NoErr(a.turn(bg, "U")) // "U-0" is outcome unknown; the turn is delivered

			e, err := store.ByKey(bg, faultAccount, "U-0")
			is.NoErr(err)
			is.Equal(e.Status, turnframe.JournalOutcomeUnknown)
			is.NoErr(a.rec.Settle(bg, turnframe.JournalSubject(faultAccount, "U-0"),
				turnframe.Decision{Verdict: turnframe.VerdictResend, Actor: turnframe.ActorOperator, Note: "the remote never got it"}))
			// Crash here: Execute for the turn never runs.

			restarted := newApp(store, dom, t0.Add(afterLeases))
			var resumed []turnframe.TurnID
			h := &resumeSpy{app: restarted, resumed: &resumed}
			_, err = restarted.rec.Recover(bg, turnframe.RecoveryScope{}, h)
			is.NoErr(err)
			is.Equal(resumed, []turnframe.TurnID{e.Turn}) // recovery resumes the resent command

			e, err = store.ByKey(bg, faultAccount, "U-0")
			is.NoErr(err)
			is.True(e.Status != turnframe.JournalPending) // the resent command ran
		})
	}
}

// resumeSpy records which turns a recovery resumed, and resumes them.
type resumeSpy struct {
	*app
	resumed *[]turnframe.TurnID
}

func (s *resumeSpy) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	*s.resumed = append(*s.resumed, m.Turn)
	_, err := s.rt.Execute(ctx, m.Account, m.Turn, s.dom)
	return err
}
