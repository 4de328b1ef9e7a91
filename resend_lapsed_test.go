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

// rtOnFirstTake runs meanwhile once, just before the first take it is
// asked to forward: what another process does between Execute's read of an
// entry and its take.
type rtOnFirstTake struct {
	turnframe.Store
	meanwhile func()
}

func (s *rtOnFirstTake) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if f := s.meanwhile; f != nil && len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting {
		s.meanwhile = nil
		f()
	}
	return s.Store.Apply(ctx, w)
}

// Execute reads a resend still within its window; before its take lands,
// another process runs it (its outcome unknown again), the policy resends
// it once more, and the remote forgets the key. The take is refused (the
// entry moved) and the entry read again is a resend taken up after the
// window: it must not be taken and run there either. It is left Pending
// for the next pass, which withholds it.
func TestAResendThatLapsedWhileATakeWasRefusedIsNotRunByTheRetry(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		polUnknownCommand(t, store, clock) // the handler answered Unknown: the remote may have acted
		clock.Add(time.Minute)
		opts := []turnframe.Option{turnframe.WithClock(clock.Now),
			turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: time.Hour})}
		rec := turnframe.NewRecovery(store, opts...)
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
		is.NoErr(err)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // within the window
		turn := rtEntry(t, store, "k-charge").Turn

		racing := &rtOnFirstTake{Store: store, meanwhile: func() {
			_, err := turnframe.New(store, opts...).Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)                                                                   // another process ran the resend…
			is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // …its outcome unknown again
			again, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
			is.NoErr(err)
			is.Equal(again.Policy[0].Outcome, turnframe.PolicyResent) // resent once more, within the window
			clock.Add(2 * time.Hour)                                  // and the remote forgets the key
		}}
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
		})
		got, err := turnframe.New(racing, opts...).Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(h.callsOf("k-charge"), 0)                     // never sent blindly once the remote forgot the key
		is.Equal(got.Results[0].Kind, turnframe.ResultPending) // left for the next pass
		is.Equal(rtEntry(t, store, "k-charge").Code, turnframe.CodeResent)

		_, err = turnframe.New(store, opts...).Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(h.callsOf("k-charge"), 0)                                       // the next pass withholds it
		is.Equal(rtEntry(t, store, "k-charge").Code, turnframe.CodeKeyForgotten) // unknown, for the policy to escalate
	})
}
