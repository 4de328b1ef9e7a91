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
		ctx := context.Background()
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		obs := &recorder{}
		opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithObserver(obs),
			turnframe.WithCommand("charge", turnframe.Remote{}), turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		gen := turnframe.NewIDGenerator()
		attempt := gen.AttemptID(clock.read())
		_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.read(),
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}}})
		is.NoErr(err) // an attempt took k-charge; its process died mid-call
		is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
		clock.set(clock.read().Add(2 * time.Minute)) // the lease ended: stranded

		racing := &readThenRace{Store: store, during: func() {
			rep, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
			is.NoErr(err)
			is.True(len(rep.Policy) > 0) // recovery declared the dead attempt unknown and escalated it
		}}
		// the person fences on the attempt they looked at
		err = turnframe.NewRecovery(racing, opts...).Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:ana", Attempt: attempt.String()})
		is.NoErr(err)
		is.True(racing.once.Load()) // the recovery pass ran between the read and the write
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
		unknown, reconciled := obs.count(turnframe.SignalExternalOutcomeUnknown), obs.count(turnframe.SignalExternalReconciled)
		is.Equal(unknown, 1)    // one attempt died: one unknown outcome, counted once
		is.Equal(reconciled, 1) // settled once, by the person
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
