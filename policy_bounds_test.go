package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The policy's bounds and clocks, each at the edge a mutant moved: no lookup
// past VerifyTries even when the count was reached before this Recovery's
// configuration; SettleDelay counted from when the outcome became unknown,
// not from when the row was created.

// TestRecoverNeverLooksUpAgainOnceVerifyTriesAreSpent: lookups that could
// not tell were recorded under a larger VerifyTries (an older
// configuration, or a pass that recorded its last lookup and died before
// its escalation landed); a Recovery whose VerifyTries they reach escalates
// at once, without asking the remote again.
func TestRecoverNeverLooksUpAgainOnceVerifyTriesAreSpent(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		row := polUnknownRow(t, store, "k1", "payments")
		subject := turnframe.OutboxSubject(rtAccount, row.ID)
		pol := &polUnsure{t: t, store: store, clock: newPolClock(dispNow.Add(time.Minute))}
		is.Equal(pol.recoverWith(3), turnframe.PolicyUnsure) // first lookup
		pol.clock.Add(time.Minute)
		is.Equal(pol.recoverWith(3), turnframe.PolicyUnsure) // second lookup
		is.Equal(pol.asked, 2)
		pol.clock.Add(time.Hour)                                // every backoff has run
		is.Equal(pol.recoverWith(2), turnframe.PolicyEscalated) // two lookups are all two tries allow
		is.Equal(pol.asked, 2)                                  // not asked a third time
		is.Equal(polEvidence(t, store, subject, turnframe.CodeVerifyUnsure), 2)
		rec := dispGet(t, store, row.ID)
		is.Equal(rec.Status, turnframe.OutboxNeedsIntervention) // for a person
		is.Equal(rec.LastCode, turnframe.CodeVerifyExhausted)
	})
}

// TestRecoverCountsTheSettleDelayFromWhenTheOutcomeBecameUnknown: a row
// created long before its send went unanswered waits SettleDelay from the
// unanswered send, not from its creation: the remote may still be
// settling what it was sent a moment ago.
func TestRecoverCountsTheSettleDelayFromWhenTheOutcomeBecameUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0] // created at dispNow
		sent := dispNow.Add(time.Hour)                                                                                           // claimed and sent an hour later
		claims, err := store.ClaimDue(ctx, sent, 16, "w1", time.Minute)
		is.NoErr(err)
		is.Equal(len(claims), 1)
		is.NoErr(turnframe.MarkClaimUnknown(ctx, store, claims[0], "", sent)) // unanswered: unknown since sent
		var asked int
		found := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			asked++
			return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ch_1"}
		})
		clock := newPolClock(sent.Add(time.Minute)) // one minute into a ten-minute settle delay
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: found, SettleDelay: 10 * time.Minute}))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyWaiting)        // the delay runs from the send
		is.True(report.Policy[0].NextAt.Equal(sent.Add(10 * time.Minute))) // and ends ten minutes after it
		is.Equal(asked, 0)                                                 // not asked yet
		clock.Add(9 * time.Minute)                                         // the delay ended
		report, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyCompleted) // asked now
		is.Equal(asked, 1)
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxCompleted)
	})
}
