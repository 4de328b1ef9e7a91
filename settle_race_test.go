package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// raceAroundSettle runs beforeWrite after Settle's first ByKey.
type raceAroundSettle struct {
	turnframe.Store
	read        atomic.Bool
	beforeWrite func()
}

func (s *raceAroundSettle) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := s.Store.ByKey(ctx, a, k)
	if s.read.CompareAndSwap(false, true) {
		s.beforeWrite()
	}
	return e, err
}

// A person resends k-charge, read Executing under a dead attempt (lease
// ended). Before the write, the app's Execute declares that attempt
// unknown (counted once). Settle's write, fenced on the status it read, is
// refused; it reads the entry again and resends it from OutcomeUnknown,
// counting nothing more; the next Execute commits it. One dead attempt,
// one unknown outcome.
func TestASettleOfAnAttemptDeclaredUnknownMeanwhileCountsItOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		f.takeAndDie(t, store, turnframe.AttemptID{})
		f.clock.set(f.clock.read().Add(2 * time.Minute))
		commit := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Commit(nil) })
		racing := &raceAroundSettle{Store: store, beforeWrite: func() {
			_, err := f.rt.Execute(f.ctx, rtAccount, f.turn, commit) // declares the dead attempt unknown
			is.NoErr(err)
			is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown)
		}}
		err := turnframe.NewRecovery(racing, f.opts...).Settle(f.ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictResend, Actor: "operator:ana"})
		is.NoErr(err)
		is.True(racing.read.Load())                             // the declaration landed between the read and the write
		_, err = f.rt.Execute(f.ctx, rtAccount, f.turn, commit) // runs the resent command
		is.NoErr(err)
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
		is.Equal(f.obs.count(turnframe.SignalExternalOutcomeUnknown), 1) // one attempt died: one unknown outcome, counted once
	})
}

// A person settles k-charge (unknown after attempt 1) without an attempt
// fence (Settle then settles whatever attempt the entry is at). Between
// Settle's read (OutcomeUnknown) and its write, another operator resends
// it, attempt 2 takes it and dies, its turn is abandoned and its lease
// ends: stranded. Settle's write, fenced on the status read, is refused; it
// reads the entry again and settles attempt 2 straight from Executing,
// counting its unknown: two attempts, two unknowns, and reconciliations
// never exceed them.
func TestASettleReadUnknownThatLandsFromExecutingCountsTheUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		_, err := f.rt.Execute(f.ctx, rtAccount, f.turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Unknown("ref-1")
		}))
		is.NoErr(err)
		first := rtEntry(t, store, "k-charge")
		is.Equal(first.Status, turnframe.JournalOutcomeUnknown) // attempt 1: unknown, counted
		racing := &readThenRace{Store: store, during: func() {
			is.NoErr(turnframe.NewRecovery(store, f.opts...).Settle(f.ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
				turnframe.Decision{Verdict: turnframe.VerdictResend, Actor: "operator:bob", Attempt: first.Attempt.String()})) // another operator resends it
			f.takeAndDie(t, store, first.Attempt) // attempt 2
			is.NoErr(f.rt.Abandon(f.ctx, rtAccount, f.turn, "user.left"))
			f.clock.set(f.clock.read().Add(2 * time.Minute)) // stranded
		}}
		err = turnframe.NewRecovery(racing, f.opts...).Settle(f.ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:ana"})
		is.NoErr(err)
		is.True(racing.once.Load())
		h := histOf(t, store, turnframe.JournalSubject(rtAccount, "k-charge"))
		is.Equal(h[len(h)-1].From, turnframe.JournalExecuting.String()) // attempt 2 settled straight from Executing
		unknown, reconciled := f.obs.count(turnframe.SignalExternalOutcomeUnknown), f.obs.count(turnframe.SignalExternalReconciled)
		is.Equal(unknown, 2)           // two attempts, each unknown: each counted once
		is.True(reconciled <= unknown) // reconciliations never exceed unknowns
	})
}
