package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// polNoResume is a RecoveryHandler whose resumption of a turn fails, as a
// process that dies before it runs the turn's commands.
type polNoResume struct{}

func (polNoResume) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (polNoResume) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return context.Canceled
}
func (polNoResume) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// The policy resends an unknown command to a remote that deduplicates only
// while the remote remembers its key. A resend it allowed then was left
// Pending — its turn abandoned before it ran (a new turn adopts it), or its
// turn's resumption failed (a later Execute runs it) — and taken up after
// the remote forgot the key: run then, it would be the blind resend the
// policy refuses, and a charge that landed would land twice. Execute
// withholds it: the handler is not called, the outcome stays unknown, and
// the next Recover escalates it (CodeKeyForgotten).
func TestAResendTakenUpAfterTheRemoteForgotTheKeyIsWithheld(t *testing.T) {
	for _, tt := range []struct {
		name string
		// resume is how the resend is left pending, and returns the turn
		// that runs it later.
		resume func(t *testing.T, ctx context.Context, rt *turnframe.Runtime, rec *turnframe.Recovery, store turnframe.Store, first turnframe.TurnID, clock *polClock) turnframe.TurnID
	}{
		{"adopted by a new turn after its turn was abandoned", func(t *testing.T, ctx context.Context, rt *turnframe.Runtime, rec *turnframe.Recovery, store turnframe.Store, first turnframe.TurnID, clock *polClock) turnframe.TurnID {
			is := is.New(t)
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, &polAbandonOnResume{rt: rt})
			is.NoErr(err)
			is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // the remote still remembers the key
			is.Equal(rtPhase(t, store, first), turnframe.PhaseAbandoned)
			clock.Add(2 * time.Hour) // the remote forgets the key
			second, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "charge it after all")
			is.NoErr(err)
			planned, err := rt.Plan(ctx, rtAccount, second, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-charge", "card/1", "charge")}})
			is.NoErr(err)
			is.Equal(planned.Admissions[0].Kind, turnframe.AdoptedFromAbandoned)
			return second
		}},
		{"run by a later pass after its turn's resumption failed", func(t *testing.T, ctx context.Context, rt *turnframe.Runtime, rec *turnframe.Recovery, store turnframe.Store, first turnframe.TurnID, clock *polClock) turnframe.TurnID {
			is := is.New(t)
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
			is.NoErr(err)
			is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // the remote still remembers the key
			clock.Add(2 * time.Hour)                                   // the remote forgets the key
			return first
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newPolClock(dispNow)
				first := polUnknownCommand(t, store, clock) // the handler answered Unknown: the remote may have acted
				clock.Add(time.Minute)
				opts := []turnframe.Option{turnframe.WithClock(clock.Now),
					turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: time.Hour})}
				rt := turnframe.New(store, opts...)
				rec := turnframe.NewRecovery(store, opts...)
				turn := tt.resume(t, ctx, rt, rec, store, first, clock)
				is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalPending) // the resend, not run yet

				h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(h.callsOf("k-charge"), 0) // never sent blindly once the remote forgot the key
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // still unknown, for the policy
				is.Equal(e.Code, turnframe.CodeKeyForgotten)

				_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention) // a person decides
			})
		})
	}
}
