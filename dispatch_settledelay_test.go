package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestSettleDelayCountsFromWhenTheSendBecameUnknown: Remote.SettleDelay
// is "how long after the outcome became unknown the first lookup waits, for
// remotes whose lookups lag behind their writes" (remote.go; DESIGN.md §10;
// RELIABILITY §13 row 17). A send that took ten minutes by the one clock
// (WithClock) and then went unanswered became unknown ten minutes after its
// claim. The dispatcher stamps its OutcomeUnknown settlement with the claim's
// time, so the policy counts the settle delay from the claim, and a lookup
// is made at once — while the remote may still be writing the effect the
// call left with — and its "not happened" resends it.
func TestSettleDelayCountsFromWhenTheSendBecameUnknown(t *testing.T) {
	answeredUnknown := func(context.Context) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.504"}
	}
	cases := []struct {
		name    string
		timeout time.Duration
		answer  func(ctx context.Context) turnframe.Dispatched
		took    time.Duration // the send's time, by the one clock
		after   time.Duration // when recovery looks, after the outcome became unknown
		delay   time.Duration // the remote's SettleDelay
	}{
		{"answered unknown", time.Hour, answeredUnknown, 10 * time.Minute, time.Minute, 5 * time.Minute},
		{"timed out", 20 * time.Millisecond, func(ctx context.Context) turnframe.Dispatched {
			<-ctx.Done() // the real deadline: the call is unknown (CodeSendTimeout)
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "late"}
		}, 10 * time.Minute, time.Minute, 5 * time.Minute},
		// Dated to the whole second past the claim, a 1.9 s send became
		// unknown "at 1 s": a 2 s delay looked up 1.2 s after the unknown.
		{"answered unknown after a fraction of a second", time.Hour, answeredUnknown, 1900 * time.Millisecond, 1200 * time.Millisecond, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0]
				clock := newStepClock(dispNow)
				sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
					clock.set(dispNow.Add(tc.took)) // the send takes its time by the one clock
					return tc.answer(ctx)
				})
				d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: tc.timeout}, turnframe.WithClock(clock.read))
				report, err := d.RunOnce(ctx, dispNow)
				is.NoErr(err)
				is.Equal(len(report.Unknown), 1)

				var asked int
				verifier := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
					asked++ // the remote's lookup lags its writes: it does not see the effect yet
					return turnframe.Verification{Found: turnframe.FoundNotHappened}
				})
				clock.set(dispNow.Add(tc.took + tc.after)) // a while after the outcome became unknown
				rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read),
					turnframe.WithDestination("payments", turnframe.Remote{Verifier: verifier, SettleDelay: tc.delay}))
				rep, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
				is.NoErr(err)
				got := policyFor(t, rep, turnframe.OutboxSubject(rtAccount, row.ID))
				is.Equal(asked, 0)                                                         // not looked up inside the settle delay
				is.Equal(got.Outcome, turnframe.PolicyWaiting)                             // it waits…
				is.True(got.NextAt.Equal(dispNow.Add(tc.took + tc.delay)))                 // …the delay from when it became unknown
				is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown) // and is not sent again
			})
		})
	}
}
