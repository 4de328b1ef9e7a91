package faulttest_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// TestResendOnDeliveredTurnSurvivesACrash shows a crash window the
// recovery contract leaves open (reported to the owners of turn.go and
// recovery.go; this test fails until it is closed).
//
// A turn is delivered ("we are verifying your payment") while a command is
// outcome unknown. Reconciliation finds the remote never received it and
// answers VerdictResend: ReconcileCommand puts the entry back to Pending.
// The process crashes before it calls Execute for that turn, as
// ReconcileCommand's doc asks it to. After the restart, the recovery sweep
// must find the pending entry and resume it. It does not:
// ListUnfinishedTurns lists turns that are non-terminal or hold an
// OutcomeUnknown entry, and this turn is Delivered with a Pending one, so
// it is never listed, and Decide would say ActionNothing (terminal phase
// before pending entries). The intended effect is lost for good.
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
			is.NoErr(a.rt.ReconcileCommand(bg, faultAccount, "U-0", turnframe.VerdictResend, ""))
			// Crash here: Execute for the turn never runs.

			restarted := newApp(store, dom, t0.Add(afterLeases))
			var resumed []turnframe.TurnID
			h := &resumeSpy{app: restarted, resumed: &resumed}
			_, err = restarted.rec.Sweep(bg, turnframe.RecoveryScope{}, turnframe.MaxLimit, h)
			is.NoErr(err)
			is.Equal(resumed, []turnframe.TurnID{e.Turn}) // recovery resumes the resent command

			e, err = store.ByKey(bg, faultAccount, "U-0")
			is.NoErr(err)
			is.True(e.Status != turnframe.JournalPending) // the resent command ran
		})
	}
}

// resumeSpy records which turns a sweep resumed, and resumes them.
type resumeSpy struct {
	*app
	resumed *[]turnframe.TurnID
}

func (s *resumeSpy) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	*s.resumed = append(*s.resumed, m.Turn)
	_, err := s.rt.Execute(ctx, m.Account, m.Turn, s.dom)
	return err
}
