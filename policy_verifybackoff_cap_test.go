package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Remote.VerifyBackoff: "the wait after a lookup that could not tell; it
// doubles after each, and no wait is longer than a minute (a longer
// VerifyBackoff waits a minute from the first)". A lookup that cannot tell
// is asked again a minute later, not VerifyBackoff later, and the next
// Recover within that minute does not ask.
func TestAVerifyBackoffLongerThanAMinuteWaitsAMinute(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		polUnknownRow(t, store, "k1", "payments")
		asked := 0
		remote := turnframe.Remote{VerifyTries: 5, VerifyBackoff: time.Hour,
			Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
				asked++
				return turnframe.Verification{Found: turnframe.FoundUnsure}
			})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyUnsure)
		is.Equal(report.Policy[0].NextAt, clock.Now().Add(time.Minute)) // a minute, not an hour

		clock.Add(time.Minute) // the minute is up
		report, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(asked, 2) // asked again
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyUnsure)
		is.Equal(report.Policy[0].NextAt, clock.Now().Add(time.Minute)) // the wait stays a minute
	})
}
