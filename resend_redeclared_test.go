package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// The policy resends an unknown command to a remote declared to
// deduplicate, and the process stops before the resend runs. It starts
// again with the command's Remote declared otherwise: the operator learnt
// the remote does not deduplicate after all (it can be asked, or can do
// neither). Taken up blindly, the resend would repeat at that remote a
// request it may have done. It is withheld (unknown, CodeKeyForgotten) and
// left to the policy of the Remote declared now: a lookup, or a person.
// With no Remote declared at all, the command runs as before policies.
func TestAResendOfARemoteRedeclaredAsNotDeduplicatingIsWithheld(t *testing.T) {
	happened := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		return turnframe.Verification{Found: turnframe.FoundHappened}
	})
	cases := []struct {
		name     string
		remote   *turnframe.Remote // nil: none declared
		later    time.Duration     // from the resend to the restart's Execute
		policy   turnframe.PolicyOutcome
		status   turnframe.JournalStatus
		withheld bool
	}{
		{"neither", &turnframe.Remote{}, time.Minute, turnframe.PolicyEscalated, turnframe.JournalNeedsIntervention, true},
		{"asked", &turnframe.Remote{Verifier: happened}, time.Minute, turnframe.PolicyCompleted, turnframe.JournalCommitted, true},
		// A remote that can be asked and still deduplicates is judged by
		// its window, as one that only deduplicates.
		{"asked, and deduplicating", &turnframe.Remote{Verifier: happened, Deduplicates: arrWindow}, time.Minute, 0, turnframe.JournalCommitted, false},
		{"asked, and deduplicating, too near the window's end", &turnframe.Remote{Verifier: happened, Deduplicates: arrWindow},
			arrWindow - arrBound, turnframe.PolicyCompleted, turnframe.JournalCommitted, true},
		{"undeclared", nil, time.Minute, 0, turnframe.JournalCommitted, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock, _, opts := arrCharge()
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					if n == 1 {
						return turnframe.Unknown("") // it may have charged
					}
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				rt := turnframe.New(store, opts...)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // declared to deduplicate, in its window
				clock.Add(c.later)

				// The restart, with the Remote declared anew.
				opts = []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound)}
				if c.remote != nil {
					opts = append(opts, turnframe.WithCommand("charge", *c.remote))
				}
				_, err = turnframe.New(store, opts...).Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				if !c.withheld {
					is.Equal(h.callsOf("k-charge"), 2) // run: as before policies, or in the window
					is.Equal(rtEntry(t, store, "k-charge").Status, c.status)
					return
				}
				is.Equal(h.callsOf("k-charge"), 1) // never repeated blindly
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // still unknown, for the policy
				is.Equal(e.Code, turnframe.CodeKeyForgotten)

				report, err = turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(report.Policy[0].Outcome, c.policy) // the policy of the Remote declared now
				is.Equal(rtEntry(t, store, "k-charge").Status, c.status)
			})
		})
	}
}

// The same at a Dispatcher: the policy resent an unknown row to a
// destination declared to deduplicate, and the row is claimed after a
// restart that declares the destination a remote that does not (it can do
// neither). Sent, it would repeat at that remote a request it may have
// done; it is withheld (unknown, CodeKeyForgotten), and the policy of the
// Remote declared now escalates it.
func TestAnOutboxResendOfADestinationRedeclaredAsNotDeduplicatingIsWithheld(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		clock := newPolClock(dispNow)
		clock.Add(time.Minute)
		polResend(t, ctx, store, clock, turnframe.Remote{Deduplicates: arrWindow})
		clock.Add(time.Minute)

		sender := &arrSender{remote: newArrRemote(clock)}
		opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", turnframe.Remote{})}
		report, err := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2", SendTimeout: arrBound},
			opts...).RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(sender.count(), 0) // never repeated blindly
		is.Equal(report.Unknown, []turnframe.OutboxID{row.ID})
		is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeKeyForgotten)

		recovered, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(recovered.Policy[0].Outcome, turnframe.PolicyEscalated) // the policy of the Remote declared now
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention)
	})
}
