package turnframe_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// A commit that finds its case moved re-runs the handler: the same request,
// under the same key, to the same remote. At a remote declared not to
// deduplicate — one that can do neither, or can only be asked — the re-run
// repeats an effect the first call did (the charge it committed), and the
// remote does it again. It is withheld: the attempt is settled unknown
// (CodeRerunWithheld, actor policy), the handler not called again, and the
// policy of its Remote resolves it — a person, or a lookup that finds it
// done. A remote that deduplicates, and an undeclared command, are re-run
// as before.
func TestACommitConflictReRunAtARemoteThatDoesNotDeduplicateIsWithheld(t *testing.T) {
	happened := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		return turnframe.Verification{Found: turnframe.FoundHappened}
	})
	cases := []struct {
		name   string
		remote *turnframe.Remote // nil: none declared
		policy turnframe.PolicyOutcome
		status turnframe.JournalStatus
		calls  int
	}{
		{"neither", &turnframe.Remote{}, turnframe.PolicyEscalated, turnframe.JournalNeedsIntervention, 1},
		{"asked", &turnframe.Remote{Verifier: happened}, turnframe.PolicyCompleted, turnframe.JournalCommitted, 1},
		{"deduplicating", &turnframe.Remote{Deduplicates: arrWindow}, 0, turnframe.JournalCommitted, 2},
		{"undeclared", nil, 0, turnframe.JournalCommitted, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newPolClock(dispNow)
				opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound)}
				if c.remote != nil {
					opts = append(opts, turnframe.WithCommand("charge", *c.remote))
				}
				rt := turnframe.New(store, opts...)
				other := turnframe.New(store, turnframe.WithClock(clock.Now))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "card/1", "bump"))
				charged := 0 // what a remote that keeps no keys did
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					charged++
					if n == 1 { // the case moves under the first commit
						_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript))
						is.NoErr(err)
					}
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(h.callsOf("k-charge"), c.calls) // re-run only where the remote deduplicates, or nothing is declared
				if c.calls == 2 {
					is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted) // re-run, as before
					return
				}
				is.Equal(charged, 1) // never charged twice
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // for the policy
				is.Equal(e.Code, turnframe.CodeRerunWithheld)

				report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(report.Policy[0].Outcome, c.policy) // its Remote's policy
				is.Equal(rtEntry(t, store, "k-charge").Status, c.status)
			})
		})
	}
}
