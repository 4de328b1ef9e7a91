package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestSettleDelayIsNotShortenedByTheTruncatedUnknownTime: 091a06a
// dates an unknown settlement at the claim plus the send's time cut to the
// whole second. A send that took 1.9 s by the one clock is dated 1 s after
// its claim, 0.9 s before it became unknown: a two-second SettleDelay is
// counted from a time the remote was still being written to, and the
// lookup made 1.2 s after the unknown (inside the settle delay) finds
// "not happened" and resends it — the effect the delay exists to protect
// (Remote.SettleDelay: "how long after the outcome became unknown").
func TestSettleDelayIsNotShortenedByTheTruncatedUnknownTime(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0]
		clock := newStepClock(dispNow)
		took := 1900 * time.Millisecond
		sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			clock.set(dispNow.Add(took)) // the send takes 1.9 s by the one clock
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.504"}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: time.Hour}, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)
		is.Equal(len(report.Unknown), 1)

		var asked int
		verifier := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			asked++ // the remote's lookup lags its writes
			return turnframe.Verification{Found: turnframe.FoundNotHappened}
		})
		clock.set(dispNow.Add(took + 1200*time.Millisecond)) // 1.2 s after the outcome became unknown
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: verifier, SettleDelay: 2 * time.Second}))
		_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(asked, 0)                                                         // not looked up 1.2 s into a 2 s settle delay
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown) // and not sent again
	})
}
