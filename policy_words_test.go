package turnframe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A Verifier's words — its note and its code — are application text. None
// of them may refuse the record that settles the effect or counts the
// lookup: an answer whose note was not valid UTF-8, or held a NUL byte, used
// to be looked up again on every Recover, never settled and never escalated.
func TestAVerifiersWordsNeverStopThePolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		found turnframe.Finding
		note  string
		want  turnframe.OutboxStatus // after at most VerifyTries (2) Recovers
	}{
		{"HappenedWithANoteNotUTF8", turnframe.FoundHappened, "ok \xff\xfe", turnframe.OutboxCompleted},
		{"HappenedWithANUL", turnframe.FoundHappened, "ok\x00", turnframe.OutboxCompleted},
		{"NotHappenedWithANoteNotUTF8", turnframe.FoundNotHappened, "gone \xff", turnframe.OutboxPending},
		{"UnsureWithANUL", turnframe.FoundUnsure, "busy\x00", turnframe.OutboxNeedsIntervention},
		{"UnsureWithANoteNotUTF8", turnframe.FoundUnsure, "busy \xc3", turnframe.OutboxNeedsIntervention},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				row := polUnknownRow(t, store, "k1", "payments")
				asked := 0
				remote := turnframe.Remote{VerifyTries: 2, VerifyBackoff: time.Second, Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
					asked++
					return turnframe.Verification{Found: tc.found, RemoteRef: "ch_1", Code: "remote.42", Note: tc.note}
				})}
				clock := newPolClock(dispNow.Add(time.Minute))
				rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
				for range 2 {
					report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
					is.NoErr(err)
					for _, p := range report.Policy {
						is.NoErr(p.Err) // the policy's write landed
					}
					clock.Add(time.Hour)
				}
				is.Equal(dispGet(t, store, row.ID).Status, tc.want) // settled, resent or escalated
				is.True(asked <= 2)                                 // within VerifyTries
				var kept bool
				for _, h := range histOf(t, store, turnframe.OutboxSubject(rtAccount, row.ID)) {
					kept = kept || strings.HasPrefix(h.Note, "(remote.42) ") || strings.Contains(h.Note, ": (remote.42) ")
				}
				is.True(kept) // the verifier's code is in the trail, at the head of its note
			})
		})
	}
}

// TestAVerifiedResendIsBoundedToo: a remote that can be asked, that never
// answers a send and always says it never received one, is sent to at most
// 1 + Resends times, then escalated — not sent to for ever.
func TestAVerifiedResendIsBoundedToo(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments") // the first send: no answer
		remote := turnframe.Remote{Resends: 2, Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			return turnframe.Verification{Found: turnframe.FoundNotHappened}
		})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		sends := 1
		d := turnframe.NewDispatcher(store, turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			sends++
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "net.reset"}
		}), turnframe.DispatchConfig{WorkerID: "w2"}, turnframe.WithClock(clock.Now))
		var outcomes []turnframe.PolicyOutcome
		for range 5 {
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			is.NoErr(err)
			for _, p := range report.Policy {
				is.NoErr(p.Err)
				outcomes = append(outcomes, p.Outcome)
			}
			_, err = d.RunOnce(ctx, clock.Now())
			is.NoErr(err)
			clock.Add(time.Hour)
		}
		is.Equal(outcomes, []turnframe.PolicyOutcome{turnframe.PolicyResent, turnframe.PolicyResent, turnframe.PolicyEscalated})
		is.Equal(sends, 3) // the first send and two resends
		got := dispGet(t, store, row.ID)
		is.Equal(got.Status, turnframe.OutboxNeedsIntervention)
		is.Equal(got.LastCode, turnframe.CodeResendsExhausted)
	})
}

// The policy's own words around a Verifier's never refuse its settlement:
// the escalation after the last unsure lookup wrote "the remote could not
// tell after every lookup allowed; last: " and the lookup's note cut to
// MaxNoteLen, over the bound Settle checks, so the row stayed OutcomeUnknown
// and the pass reported an error.
func TestALongUnsureNoteNeverRefusesTheEscalation(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		remote := turnframe.Remote{VerifyTries: 1, Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			return turnframe.Verification{Found: turnframe.FoundUnsure, Note: strings.Repeat("x", 1000)}
		})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		p := policyFor(t, report, turnframe.OutboxSubject(rtAccount, row.ID))
		t.Logf("policy: %v, err: %v", p.Outcome, p.Err)
		is.NoErr(p.Err)                                                               // the escalation's write landed
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention) // escalated after its one try
	})
}
