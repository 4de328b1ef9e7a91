package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of taking a journal entry (issue 12 items 8–10): a take is a
// compare-and-set on the attempt the caller saw, under a lease; a command
// runs in at most one place at a time; only the attempt holding an entry
// settles it; only a reconciliation moves an OutcomeUnknown entry; nothing
// is taken or resent on an abandoned turn (issue 11 item 6).

func takeTests() []test {
	return []test{
		{"ATakeIsACompareAndSetOnTheAttemptTheCallerSaw", testTakeCAS},
		{"AnExecutingEntryWithALiveLeaseCannotBeTakenOver", testTakeLive},
		{"AnExecutingEntryWhoseLeaseEndedIsTakenOverByANewAttempt", testTakeOver},
		{"TheHolderRenewsItsLeaseUnderTheSameAttempt", testTakeRenew},
		{"ARenewalNeverShortensTheLease", testTakeRenewNeverShortens},
		{"OnlyAReconciliationMovesAnOutcomeUnknownEntry", testUnknownOnlyReconciled},
		{"AResendOnAnAbandonedTurnIsConflictAndWritesNothing", testResendAbandoned},
		{"NoAttemptTakesAnEntryOfAnAbandonedTurnButTheRunningOneStillSettles", testTakeAbandoned},
		{"LeaseUntilIsStoredWhileExecutingAndZeroAfter", testEntryLeaseStored},
		{"OfTwoCallersTakingOnePendingEntryAtOnceExactlyOneSucceeds", testTakeConcurrent},
	}
}

// oneOfTwo applies the Writes write(0) and write(1) from two goroutines at
// once and returns which one landed: exactly one must, and the other must
// be refused with ErrConflict.
func (e *env) oneOfTwo(round int, write func(i int) turnframe.Write) int {
	e.t.Helper()
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		w := write(i)
		wg.Go(func() {
			<-start
			_, errs[i] = e.s.Apply(e.ctx, w)
		})
	}
	close(start)
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			e.t.Fatalf("round %d: both writes landed", round)
		case err == nil:
			won = i
		case !errors.Is(err, turnframe.ErrConflict):
			e.t.Fatalf("round %d: write %d: got error %v, want nil or ErrConflict", round, i, err)
		}
	}
	if won < 0 {
		e.t.Fatalf("round %d: neither write landed: %v", round, errors.Join(errs[:]...))
	}
	return won
}

// takeWrite returns the Write in which attempt takes the entry under key
// from prior at now.
func takeWrite(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, attempt, prior turnframe.AttemptID, now time.Time) turnframe.Write {
	return turnframe.Write{Account: account, Turn: turn, Now: now, Settle: []turnframe.Settlement{take(key, attempt, prior)}}
}

func testTakeCAS(t *testing.T, e *env) {
	for _, tc := range []struct {
		name string
		// setup makes the entry; it returns the turn, the key, the attempt
		// the entry is under, and a stale attempt a caller may have seen.
		setup func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID, turnframe.AttemptID)
	}{
		{"PendingNeverRun", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID, turnframe.AttemptID) {
			turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
			return turn, key, turnframe.AttemptID{}, e.ids.AttemptID(at(0)) // an attempt that never ran it
		}},
		{"ExecutingWithItsLeaseEnded", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID, turnframe.AttemptID) {
			turn, key, attempt := e.entryIn(acme, turnframe.JournalExecuting, at(0))
			return turn, key, attempt, turnframe.AttemptID{} // the caller saw it pending
		}},
		{"ExecutingUnderASecondAttempt", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID, turnframe.AttemptID) {
			turn, key, first := e.entryIn(acme, turnframe.JournalExecuting, at(-lease))
			second := e.execute(acme, turn, key, at(0)) // took over at 0, leased until lease
			return turn, key, second, first             // the caller saw the first attempt
		}},
		{"PendingAgainAfterAResend", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID, turnframe.AttemptID) {
			turn, key, attempt := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
			e.settle(acme, turn, at(0), turnframe.Settlement{Key: key, To: turnframe.JournalPending}) // reconciled: resend
			return turn, key, attempt, turnframe.AttemptID{}                                          // the entry keeps its last attempt; zero is stale
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, current, stale := tc.setup(e)
			now := at(2 * lease) // every lease has ended
			e.refused(takeWrite(acme, turn, key, e.ids.AttemptID(now), stale, now), turnframe.ErrConflict, "take with a stale prior")
			next := e.ids.AttemptID(now)
			got := e.settle(acme, turn, now, take(key, next, current))
			is.Equal(got.Status, turnframe.JournalExecuting) // the current prior takes it
			is.Equal(got.Attempt, next)                      // under the new attempt
		})
	}
}

func testTakeLive(t *testing.T, e *env) {
	turn, key, running := e.running(acme, "booking/1", at(0)) // leased until at(lease)
	for _, now := range []time.Time{at(time.Second), at(lease - time.Microsecond)} {
		t.Run(fmt.Sprintf("at_%v", now.Sub(base)), func(t *testing.T) {
			is := is.New(t)
			e.refused(takeWrite(acme, turn, key, e.ids.AttemptID(now), running, now), turnframe.ErrConflict, "take over a live lease")
			is.Equal(e.entry(acme, key).Attempt, running) // still the running attempt's
		})
	}
}

func testTakeOver(t *testing.T, e *env) {
	for _, after := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("%v_after_the_lease_ended", after), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, running := e.running(acme, "booking/1", at(0))
			now := at(lease + after)
			next := e.ids.AttemptID(now)
			got := e.settle(acme, turn, now, take(key, next, running))
			stored := e.entry(acme, key)
			is.Equal(got, stored)                               // applied as stored
			is.Equal(stored.Status, turnframe.JournalExecuting) // executing
			is.Equal(stored.Attempt, next)                      // under the new attempt
			is.Equal(stored.Attempts, 2)                        // a second attempt
			is.True(stored.LeaseUntil.Equal(now.Add(lease)))    // a new lease
		})
	}
}

func testTakeRenew(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, running := e.running(acme, "booking/1", at(0)) // leased until at(lease)
	renew := turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: running, Lease: lease}
	got := e.settle(acme, turn, at(5*time.Second), renew)
	is.Equal(got.Attempt, running)                               // the same attempt
	is.Equal(got.Attempts, 1)                                    // not a new attempt
	is.True(got.LeaseUntil.Equal(at(5*time.Second + lease)))     // held until now + lease
	is.True(e.entry(acme, key).LeaseUntil.Equal(got.LeaseUntil)) // as stored
	now := at(lease + time.Second)                               // after the first lease, inside the renewed one
	e.refused(takeWrite(acme, turn, key, e.ids.AttemptID(now), running, now), turnframe.ErrConflict, "take over a renewed lease")
	got = e.settle(acme, turn, at(lease+2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Attempt: running})
	is.Equal(got.Status, turnframe.JournalCommitted) // the holder settles
}

func testTakeRenewNeverShortens(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, running := e.running(acme, "booking/1", at(0)) // leased until at(lease)
	short := turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: running, Lease: time.Second}
	got := e.settle(acme, turn, at(time.Second), short)     // now + its lease is at(2s), before at(lease)
	is.Equal(got.Attempt, running)                          // the same attempt
	is.Equal(got.Attempts, 1)                               // not a new attempt
	is.True(got.LeaseUntil.Equal(at(lease)))                // applied: the lease it had, not a shorter one
	is.True(e.entry(acme, key).LeaseUntil.Equal(at(lease))) // stored so
	now := at(lease - time.Second)                          // after the short lease would have ended, inside the one it had
	e.refused(takeWrite(acme, turn, key, e.ids.AttemptID(now), running, now), turnframe.ErrConflict, "take over a lease a short renewal must not have shortened")
	is.Equal(e.entry(acme, key).Attempt, running) // still the running attempt's
}

func testUnknownOnlyReconciled(t *testing.T, e *env) {
	for _, to := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending, turnframe.JournalNeedsIntervention} {
		t.Run(to.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, ran := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
			for _, by := range []struct {
				what    string
				attempt turnframe.AttemptID
			}{
				{"the attempt that ran", ran},
				{"a stale attempt", e.ids.AttemptID(at(0))},
			} {
				s := settlementTo(key, turnframe.JournalExecuting, to, by.attempt, turnframe.AttemptID{})
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Settle: []turnframe.Settlement{s}},
					turnframe.ErrConflict, "settle an unknown entry with "+by.what)
			}
			got := e.settle(acme, turn, at(time.Second), settlementTo(key, turnframe.JournalOutcomeUnknown, to, ran, turnframe.AttemptID{}))
			is.Equal(got.Status, to) // a reconciliation moves it
		})
	}
}

func testResendAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Second),
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalPending}}}, turnframe.ErrConflict, "resend on an abandoned turn")
	is.Equal(e.entry(acme, key).Status, turnframe.JournalOutcomeUnknown) // still unknown: recovery still lists the turn
	got := e.settle(acme, turn, at(2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Code: "never_arrived"})
	is.Equal(got.Status, turnframe.JournalRejected) // a reconciliation that sends nothing still lands
}

func testTakeAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.turnIn(acme, turnframe.PhaseExecuting, at(0))
	pending, running := e.freshKey(), e.freshKey()
	e.admit(acme, turn, at(0), command(pending, "booking/1"), command(running, "booking/2"))
	attempt := e.execute(acme, turn, running, at(0)) // leased until at(lease)
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})

	now := at(2 * lease) // every lease has ended
	e.refused(takeWrite(acme, turn, pending, e.ids.AttemptID(now), turnframe.AttemptID{}, now), turnframe.ErrConflict, "take a pending entry of an abandoned turn")
	e.refused(takeWrite(acme, turn, running, e.ids.AttemptID(now), attempt, now), turnframe.ErrConflict, "take over an entry of an abandoned turn")

	a := e.commit(acme, turn, running, attempt, now, []turnframe.Event{{Case: "booking/2", Type: "booked"}}, nil)
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted)         // the running attempt still settles
	is.Equal(len(a.Events), 1)                                        // with its events
	is.Equal(a.Phase, turnframe.PhaseAbandoned)                       // the turn stays abandoned
	is.Equal(e.entry(acme, pending).Status, turnframe.JournalPending) // the refused take changed nothing
}

func testEntryLeaseStored(t *testing.T, e *env) {
	for _, to := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalOutcomeUnknown} {
		t.Run(to.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			turn, key, attempt := e.running(acme, "booking/1", at(time.Second))
			is.True(e.entry(acme, key).LeaseUntil.Equal(at(time.Second + lease))) // by key, while executing
			es, err := e.s.ForTurn(e.ctx, acme, turn)
			is.NoErr(err)                                            // for turn
			is.True(es[0].LeaseUntil.Equal(at(time.Second + lease))) // for turn, while executing
			got := e.settle(acme, turn, at(2*time.Second), settlementTo(key, turnframe.JournalExecuting, to, attempt, turnframe.AttemptID{}))
			is.True(got.LeaseUntil.IsZero())                // applied: no lease once settled
			is.True(e.entry(acme, key).LeaseUntil.IsZero()) // stored: no lease once settled
			if to == turnframe.JournalOutcomeUnknown {
				e.settle(acme, turn, at(3*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalPending})
				is.True(e.entry(acme, key).LeaseUntil.IsZero()) // nor when put back to pending
			}
		})
	}
}

func testTakeConcurrent(t *testing.T, e *env) {
	is := is.New(t)
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	for round := range rounds {
		now := at(time.Duration(round) * time.Second)
		turn, key, _ := e.entryIn(acme, turnframe.JournalPending, now)
		attempts := [2]turnframe.AttemptID{e.ids.AttemptID(now), e.ids.AttemptID(now)}
		won := e.oneOfTwo(round, func(i int) turnframe.Write {
			return takeWrite(acme, turn, key, attempts[i], turnframe.AttemptID{}, now)
		})
		got := e.entry(acme, key)
		is.Equal(got.Attempt, attempts[won]) // under the winner's attempt
		is.Equal(got.Attempts, 1)            // taken once
	}
}
