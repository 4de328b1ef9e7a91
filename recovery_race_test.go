package turnframe_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A person settles an attempt stranded on an abandoned turn (read
// Executing). Between Settle's read and its write, a recovery pass declares
// the same dead attempt unknown (counting it) and escalates it. The person's
// settlement then lands (NeedsIntervention → Committed, same attempt): one
// unknown outcome, counted once, by recovery, not again by Settle on its
// stale read.
func TestASettleRacingRecoverCountsAStrandedAttemptsUnknownOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		attempt := f.takeAndDie(t, store, turnframe.AttemptID{})
		is.NoErr(f.rt.Abandon(f.ctx, rtAccount, f.turn, "user.left"))
		f.clock.set(f.clock.read().Add(2 * time.Minute)) // the lease ended: stranded
		racing := &readThenRace{Store: store, during: func() {
			rep, err := turnframe.NewRecovery(store, f.opts...).Recover(f.ctx, turnframe.RecoveryScope{}, &recHandler{})
			is.NoErr(err)
			is.True(len(rep.Policy) > 0) // recovery declared the dead attempt unknown and escalated it
		}}
		// the person fences on the attempt they looked at
		err := turnframe.NewRecovery(racing, f.opts...).Settle(f.ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:ana", Attempt: attempt.String()})
		is.NoErr(err)
		is.True(racing.once.Load()) // the recovery pass ran between the read and the write
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
		is.Equal(f.obs.count(turnframe.SignalExternalOutcomeUnknown), 1) // one attempt died: one unknown outcome, counted once
		is.Equal(f.obs.count(turnframe.SignalExternalReconciled), 1)     // settled once, by the person
	})
}

// RecoverReport.AwaitingApproval does not list an abandoned turn's entries:
// its commands never run, and a new turn that plans the same command adopts
// them. Here recovery sweeps the abandoned turn for another reason (it holds
// an unknown outcome).
func TestRecoverDoesNotListAnAbandonedTurnsAwaitingEntries(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		opts := []turnframe.Option{turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"), apPay("k-pay"))
		_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Unknown("ref")
		}))
		is.NoErr(err)
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown)
		is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval)
		is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
		rep, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)
		var keys []turnframe.IdempotencyKey
		for _, e := range rep.AwaitingApproval {
			keys = append(keys, e.Key)
		}
		is.Equal(rep.Turns.Turns, 1) // the abandoned turn was swept
		is.Equal(len(keys), 0)       // its awaiting entry is not listed
	})
}
