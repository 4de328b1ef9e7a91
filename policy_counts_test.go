package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// TestACommandsFirstUnknownIsNoResend: a command whose one attempt came
// back unknown has been run once, and resent never; to a remote that
// deduplicates and allows one resend, the policy sends it again under the
// same key (its Attempts-1 reruns are what Resends bounds, not its
// attempts).
func TestACommandsFirstUnknownIsNoResend(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		opts := []turnframe.Option{
			turnframe.WithClock(clock.Now),
			turnframe.WithCommand("pay", turnframe.Remote{Deduplicates: 24 * time.Hour, Resends: 1}),
		}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-pay", "booking/1", "pay"))
		unknown := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Unknown("") })
		_, err := rt.Execute(ctx, rtAccount, turn, unknown)
		is.NoErr(err)
		e := rtEntry(t, store, "k-pay")
		is.Equal(e.Status, turnframe.JournalOutcomeUnknown)
		is.Equal(e.Attempts, 1) // run once

		clock.Add(time.Minute)
		report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, &polTurns{rt: rt, h: unknown})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // its one resend allowed, not escalated
		is.Equal(report.Policy[0].Code, turnframe.CodeResent)
	})
}

// TestLookupsStartOverWhenAResentRowBecomesUnknownAgain: VerifyTries
// bounds the lookups of one unknown. A row looked up once (cannot tell),
// then found never received and sent again, whose second send is unknown
// too, gets its full VerifyTries for the second unknown: the lookup of the
// first is not held against it, and a lookup that cannot tell leaves it
// unsure, not escalated.
func TestLookupsStartOverWhenAResentRowBecomesUnknownAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments") // attempt 1 unknown

		var mu sync.Mutex
		calls := 0
		remote := turnframe.Remote{VerifyTries: 2, Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 2 {
				return turnframe.Verification{Found: turnframe.FoundNotHappened}
			}
			return turnframe.Verification{Found: turnframe.FoundUnsure, Note: "lookup lags"}
		})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		recoverOnce := func() turnframe.PolicyResult {
			t.Helper()
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			is.NoErr(err)
			is.Equal(len(report.Policy), 1)
			return report.Policy[0]
		}

		is.Equal(recoverOnce().Outcome, turnframe.PolicyUnsure) // attempt 1: cannot tell (one of its two tries)
		clock.Add(time.Hour)
		is.Equal(recoverOnce().Outcome, turnframe.PolicyResent) // attempt 1: never received, sent again

		d := turnframe.NewDispatcher(store, turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "net.reset"}
		}), turnframe.DispatchConfig{WorkerID: "w2"})
		rep, err := d.RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(len(rep.Unknown), 1)
		is.Equal(dispGet(t, store, row.ID).Attempts, 2) // attempt 2 unknown

		clock.Add(time.Hour)
		got := recoverOnce()
		is.Equal(got.Outcome, turnframe.PolicyUnsure) // attempt 2's first try: one left, not escalated
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown)
	})
}

// TestAVerifyBackoffStaysAMinuteHoweverManyTries: the wait after a lookup
// that could not tell doubles up to a minute and stays there, however
// many lookups a Remote allows. Doubled on past the minute, a one-second
// backoff overflows after about 35 tries, and the next lookup would be
// due at once (or in the past).
func TestAVerifyBackoffStaysAMinuteHoweverManyTries(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		polUnknownRow(t, store, "k1", "payments")
		const tries = 40
		remote := turnframe.Remote{VerifyTries: tries, VerifyBackoff: time.Second,
			Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
				return turnframe.Verification{Found: turnframe.FoundUnsure}
			})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		for try := 1; try < tries; try++ {
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			is.NoErr(err)
			is.Equal(len(report.Policy), 1)
			is.Equal(report.Policy[0].Outcome, turnframe.PolicyUnsure) // every try but the last leaves it unsure
			if try >= 7 {                                              // 2^6 s is past the minute
				is.Equal(report.Policy[0].NextAt, clock.Now().Add(time.Minute)) // the wait stays a minute
			}
			clock.Add(time.Minute)
		}
	})
}
