package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// rtTakenFirstByADyingProcess is a Store that, on the first take Execute writes, lets
// another process take the entry first (attempt B, a short lease), and then
// moves the clock past B's lease: B died mid-call, maybe after it reached
// the remote.
type rtTakenFirstByADyingProcess struct {
	turnframe.Store
	once  sync.Once
	turn  turnframe.TurnID
	clock *stepClock
	err   error
	off   bool // not armed yet
}

func (s *rtTakenFirstByADyingProcess) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if !s.off && len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting && w.Settle[0].Attempt != w.Settle[0].Prior {
		s.once.Do(func() {
			now := s.clock.read()
			b := turnframe.NewIDGenerator().AttemptID(now)
			_, s.err = s.Store.Apply(ctx, turnframe.Write{
				Account: w.Account, Turn: s.turn, Now: now,
				Settle: []turnframe.Settlement{{Key: w.Settle[0].Key, To: turnframe.JournalExecuting,
					Attempt: b, Prior: w.Settle[0].Prior, Lease: time.Minute}},
			})
			s.clock.set(now.Add(time.Hour)) // B's process died; its lease ended
		})
	}
	return s.Store.Apply(ctx, w)
}

// A command whose Remote can be asked is never run again blindly once an
// attempt of it died (I15), also when the attempt died between Execute's
// listing and its take: the take is refused because another process took
// the entry meanwhile, that attempt's lease has ended by the time Execute
// reads the entry again, and the retried take would have taken the dead
// attempt over and run the handler a second time, never asked. It is
// declared unknown for the Verifier instead.
func TestARetriedTakeNeverRerunsADeadAttemptBlindly(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		clock := newStepClock(dispNow)
		asked := 0
		remote := turnframe.Remote{Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			asked++
			return turnframe.Verification{Found: turnframe.FoundUnsure}
		})}
		store := &rtTakenFirstByADyingProcess{Store: inner, clock: clock}
		rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithCommand("pay", remote))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-pay", "booking/1", "pay"))
		store.turn = turn

		calls := 0
		_, err := rt.Execute(context.Background(), rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls++
			return turnframe.Commit(nil)
		}))
		is.NoErr(store.err) // process B took the entry
		is.NoErr(err)
		e := rtEntry(t, inner, "k-pay")
		t.Logf("entry after Execute: %v, attempts %d, handler calls here %d", e.Status, e.Attempts, calls)
		is.Equal(calls, 0)                                  // B's attempt died and may have acted: never re-run blindly
		is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // declared unknown for the Verifier to ask
	})
}

// The same retried take keeps the one Resends bound: a command runs at most
// 1 + Resends times without a person. With a deduplicating remote and
// Resends 1, the first attempt dies (run 1); Execute lists the entry and may
// take it over; another process takes it first and dies too (run 2); the
// retried take must not run the handler a third time.
func TestARetriedTakeKeepsTheResendsBound(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		clock := newStepClock(dispNow)
		store := &rtTakenFirstByADyingProcess{Store: inner, clock: clock, off: true}
		rt := turnframe.New(store, turnframe.WithClock(clock.read),
			turnframe.WithCommand("pay", turnframe.Remote{Deduplicates: 24 * time.Hour, Resends: 1}))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-pay", "booking/1", "pay"))
		store.turn = turn

		never := make(chan struct{})
		t.Cleanup(func() { close(never) })
		ctx, cancel := context.WithCancel(context.Background())
		_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			cancel() // run 1: its process dies mid-call
			<-never
			return turnframe.Reject("unreachable")
		}))
		is.True(err != nil)
		clock.set(dispNow.Add(time.Hour))

		store.off = false // run 2: another process takes the dead attempt over first, and dies too
		calls := 0
		_, err = rt.Execute(context.Background(), rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls++
			return turnframe.Commit(nil)
		}))
		is.NoErr(store.err)
		e := rtEntry(t, inner, "k-pay")
		t.Logf("entry: %v, attempts %d (runs), Resends 1", e.Status, e.Attempts)
		is.NoErr(err)
		is.Equal(calls, 0)       // two runs spent (1 + Resends): no third
		is.True(e.Attempts <= 2) // at most 1 + Resends runs without a person
	})
}
