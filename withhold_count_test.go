package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// SignalExternalReconciled "never outnumbers SignalExternalOutcomeUnknown":
// every move of an entry to OutcomeUnknown is counted, and each settlement
// of one by the policy or a person counts once. Execute's withholds — a
// re-run after a commit conflict at a remote that does not deduplicate
// (CodeRerunWithheld), a resend taken up after the remote forgot the key
// (CodeKeyForgotten) — moved the entry to OutcomeUnknown uncounted, as the
// Dispatcher's own withhold of a row is not: the policy's lookup, or its
// resend, then counted a reconciliation of an unknown never counted, and a
// dashboard of unknowns still open (unknown − reconciled) went below zero.
func TestAWithheldCallCountsItsOutcomeUnknown(t *testing.T) {
	happened := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		return turnframe.Verification{Found: turnframe.FoundHappened}
	})
	t.Run("a re-run withheld at a remote that can only be asked", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			clock := newPolClock(dispNow)
			obs := &recorder{}
			opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound),
				turnframe.WithObserver(obs), turnframe.WithCommand("charge", turnframe.Remote{Verifier: happened})}
			rt := turnframe.New(store, opts...)
			other := turnframe.New(store, turnframe.WithClock(clock.Now))
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
			bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "card/1", "bump"))
			h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
				if n == 1 { // the case moves under the first commit
					_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript))
					is.NoErr(err) // the other turn's command
				}
				return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
			})
			_, err := rt.Execute(ctx, rtAccount, turn, h)
			is.NoErr(err)                                                                    // execute
			is.Equal(rtEntry(t, store, "k-charge").Code, turnframe.CodeRerunWithheld)        // the re-run withheld
			is.Equal(obs.labels(turnframe.SignalExternalOutcomeUnknown), []turnframe.Labels{ // counted, with its code
				{Command: "charge", Outcome: turnframe.CodeRerunWithheld}})

			report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
			is.NoErr(err)                                                  // recover
			is.Equal(report.Policy[0].Outcome, turnframe.PolicyCompleted)  // the lookup found it done
			is.Equal(obs.count(turnframe.SignalExternalReconciled), 1)     // one reconciled…
			is.Equal(obs.count(turnframe.SignalExternalOutcomeUnknown), 1) // …of one unknown counted
		})
	})
	t.Run("a resend taken up after the remote forgot the key", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			clock := newPolClock(dispNow)
			obs := &recorder{}
			opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithObserver(obs),
				turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: time.Hour})}
			rt := turnframe.New(store, opts...)
			rec := turnframe.NewRecovery(store, opts...)
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
			_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)                                                  // the handler answers unknown
			is.Equal(obs.count(turnframe.SignalExternalOutcomeUnknown), 1) // counted
			clock.Add(time.Minute)
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
			is.NoErr(err)                                              // recover
			is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // resent while the remote remembers the key
			is.Equal(obs.count(turnframe.SignalExternalReconciled), 1) // the resend settles that unknown
			clock.Add(2 * time.Hour)                                   // the remote forgets the key

			_, err = rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)                                                                        // execute
			is.Equal(rtEntry(t, store, "k-charge").Code, turnframe.CodeKeyForgotten)             // withheld
			is.Equal(obs.labels(turnframe.SignalExternalOutcomeUnknown)[1:], []turnframe.Labels{ // a new unknown, counted
				{Command: "charge", Outcome: turnframe.CodeKeyForgotten}})

			is.NoErr(rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
				turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:alice"})) // a person finds it charged
			is.Equal(obs.count(turnframe.SignalExternalReconciled), 2)     // two reconciled…
			is.Equal(obs.count(turnframe.SignalExternalOutcomeUnknown), 2) // …of two unknowns counted
		})
	})
}
