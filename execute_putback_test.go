package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// rtCancelOnTake cancels the caller's context once its take of key has
// landed: the caller gives up between the take and the handler's call.
type rtCancelOnTake struct {
	turnframe.Store
	key    turnframe.IdempotencyKey
	cancel context.CancelFunc
	meddle func(ctx context.Context) // if set, run before the cancel
}

func (s *rtCancelOnTake) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	applied, err := s.Store.Apply(ctx, w)
	if err == nil && len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].To == turnframe.JournalExecuting {
		if s.meddle != nil {
			s.meddle(context.WithoutCancel(ctx))
		}
		s.cancel()
	}
	return applied, err
}

// rtChargeHandler commits a "charged" event for each call.
func rtChargeHandler() *rtHandler {
	return rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
	})
}

// A caller that gives up after Execute took an entry and before it called
// the handler left the entry held by an attempt that never ran: in flight
// to every Execute until its lease ended, and then, for a command whose
// Remote forbids a blind rerun (here one that can do neither), declared
// unknown — "may have acted" — and escalated to a person, though nothing
// was sent. The handler is not called, and the entry is put back Pending,
// the attempt uncounted: the next Execute runs it.
func TestAnAttemptWhoseCallerLeftBeforeItsCallIsPutBack(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store) // "charge" declared Remote{}: never rerun blindly
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		h := rtChargeHandler()
		leaving := &rtCancelOnTake{Store: store, key: "k-charge", cancel: cancel}
		report, err := turnframe.New(leaving, f.opts...).Execute(ctx, rtAccount, f.turn, h)
		is.True(errors.Is(err, context.Canceled)) // the caller left
		is.True(!report.Results[0].Ran)           // and the handler was not called
		e := rtEntry(t, store, "k-charge")
		is.Equal(e.Status, turnframe.JournalPending) // put back: nothing was sent
		is.Equal(e.Attempts, 0)                      // no attempt that called out

		report, err = f.rt.Execute(f.ctx, rtAccount, f.turn, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // run at once, by the next Execute
		is.Equal(h.callsOf("k-charge"), 1)                          // once
		is.Equal(rtEntry(t, store, "k-charge").Attempts, 1)         // the attempt that ran
	})
}

// rtSlowTakeBusyRenewal is a store slow to grant key's take — the clock
// moves on by slow while it does — and busy for the renewal of the
// attempt's lease that the call then needs.
type rtSlowTakeBusyRenewal struct {
	turnframe.Store
	key   turnframe.IdempotencyKey
	clock *stepClock
	slow  time.Duration
	taken turnframe.AttemptID
}

func (s *rtSlowTakeBusyRenewal) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].To == turnframe.JournalExecuting {
		if !s.taken.IsZero() && w.Settle[0].Attempt == s.taken {
			return turnframe.Applied{}, fmt.Errorf("renew: %w", turnframe.ErrBusy)
		}
		applied, err := s.Store.Apply(ctx, w)
		if err == nil {
			s.taken = w.Settle[0].Attempt
			s.clock.set(s.clock.read().Add(s.slow))
		}
		return applied, err
	}
	return s.Store.Apply(ctx, w)
}

// The same for an attempt whose first call its lease no longer covered (the
// store was slow to grant the take) and whose renewal the store refused as
// busy (§28 row 20, left open): the handler was never called, and the
// entry is put back rather than held until its lease ends and declared
// unknown.
func TestAnAttemptWhoseRenewalBeforeItsFirstCallFailsIsPutBack(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store) // "charge" declared Remote{}: never rerun blindly
		h := rtChargeHandler()
		slow := &rtSlowTakeBusyRenewal{Store: store, key: "k-charge", clock: f.clock, slow: turnframe.DefaultLeaseMargin + time.Second}
		_, err := turnframe.New(slow, f.opts...).Execute(f.ctx, rtAccount, f.turn, h)
		is.True(errors.Is(err, turnframe.ErrBusy)) // the renewal's failure, to try again
		is.Equal(h.callsOf("k-charge"), 0)         // the handler not called
		e := rtEntry(t, store, "k-charge")
		is.Equal(e.Status, turnframe.JournalPending) // put back: nothing was sent
		is.Equal(e.Attempts, 0)                      // no attempt that called out

		report, err := f.rt.Execute(f.ctx, rtAccount, f.turn, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // run at once, by the next Execute
		is.Equal(h.callsOf("k-charge"), 1)
	})
}

// A turn abandoned, and its command planned again by a new turn, between
// the take and the call: the new turn's plan, made while the entry was
// held, was told the abandoned turn holds it and adopts nothing. Put back
// Pending on the abandoned turn, the command ran in no turn — lost. The
// store refuses that put-back: the entry stays held, its lease ends, and
// recovery finds it Stranded and resolves it by its Remote's policy (for
// a remote of neither kind, a person), as before put-backs existed.
func TestAnAttemptPutBackOnATurnAbandonedAndReplannedMeanwhileIsNotLost(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store) // "charge" declared Remote{}: never rerun blindly
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		h := rtChargeHandler()
		var replan turnframe.PlanReport
		abandonAndReplan := func(ctx context.Context) { // an operator gives the turn up; the user asks again
			is.NoErr(f.rt.Abandon(ctx, rtAccount, f.turn, "operator gave up")) // abandon
			again, err := f.rt.Receive(ctx, rtAccount, f.rt.NewConversationID(), "please do it again")
			is.NoErr(err) // receive again
			replan, err = f.rt.Plan(ctx, rtAccount, again, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-charge", "card/1", "charge")}})
			is.NoErr(err) // plan again
		}
		meddler := &rtCancelOnTake{Store: store, key: "k-charge", cancel: cancel, meddle: abandonAndReplan}
		_, err := turnframe.New(meddler, f.opts...).Execute(ctx, rtAccount, f.turn, h)
		is.True(errors.Is(err, context.Canceled))                            // the caller left
		is.Equal(h.callsOf("k-charge"), 0)                                   // before the call
		is.Equal(replan.Admissions[0].Kind, turnframe.AdmittedByAnotherTurn) // the new turn was told the old one holds it
		held := rtEntry(t, store, "k-charge")
		is.Equal(held.Status, turnframe.JournalExecuting) // not put back: held
		is.Equal(held.Turn, f.turn)                       // by the abandoned turn

		f.clock.set(held.LeaseUntil)
		report, err := turnframe.NewRecovery(store, f.opts...).Recover(f.ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)                                                                      // recover
		is.Equal(len(report.NeedsIntervention), 1)                                         // the stranded attempt goes to a person
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention) // not lost
	})
}
