package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// arrSlowCall is a Store whose next case revision read, and next lease
// renewal of an attempt, each run their function (a clock moved on) before
// they are answered, once.
type arrSlowCall struct {
	turnframe.Store
	onRevision func()
	onRenew    func()
	onTake     func()
}

func (s *arrSlowCall) CaseRevision(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if f := s.onRevision; f != nil {
		s.onRevision = nil
		f()
	}
	return s.Store.CaseRevision(ctx, account, c)
}

func (s *arrSlowCall) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting {
		f := &s.onTake
		if w.Settle[0].Prior.IsZero() { // names no attempt it takes over: the holder's renewal
			f = &s.onRenew
		}
		if g := *f; g != nil {
			*f = nil
			g()
		}
	}
	return s.Store.Apply(ctx, w)
}

// A resend is taken up, and its window judged before its call, with a
// little more than the command timeout to spare; then the store is slow
// before the handler is called: to read the case's revision the call is
// made against, or to renew a lease the slow take left too short for the
// call. The handler, called after, may take the whole command timeout to
// reach the remote, which by then forgot the key. The window is judged
// when the call starts, after every read and write that precedes it: the
// resend is withheld.
func TestACommandResendDelayedByTheStoreBeforeItsCallIsWithheld(t *testing.T) {
	second := func(clock *polClock) func() { return func() { clock.Add(2 * time.Second) } }
	half := func(clock *polClock) func() { return func() { clock.Add(1500 * time.Millisecond) } }
	for _, tt := range []struct {
		name string
		left time.Duration // of the window past the command timeout, at the take-up
		slow func(clock *polClock) *arrSlowCall
	}{
		{"its case's revision read", time.Second, func(clock *polClock) *arrSlowCall {
			return &arrSlowCall{onRevision: second(clock)}
		}},
		{"its lease's renewal", 3 * time.Second, func(clock *polClock) *arrSlowCall {
			return &arrSlowCall{onTake: half(clock), onRenew: second(clock)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newPolClock(dispNow)
				remote := newArrRemote(clock)
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					if n > 1 {
						clock.Add(arrBound) // the resend takes all its time to arrive
					}
					remote.receive(string(call.Command.Key))
					if n == 1 {
						return turnframe.Unknown("") // the charge landed, its answer was lost
					}
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				turn, _, rec, opts := arrResent(t, store, clock, h)
				clock.Add(arrWindow - time.Minute - arrBound - tt.left) // in time, at the take-up

				slow := tt.slow(clock)
				slow.Store = store
				// A lease margin of a second: a take a second and a half
				// late leaves a lease that no longer covers the call.
				rt := turnframe.New(slow, append(opts, turnframe.WithLeaseMargin(time.Second))...)
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				arrWithheld(t, store, rec, remote, h, 1) // withheld: the handler not called again
			})
		})
	}
}

// A first send is judged by no window: the remote cannot have had its key
// before the call, so a command whose remote remembers keys for less than
// the command timeout is still called, once.
func TestAFirstSendToARemoteWithAWindowShorterThanItsTimeoutIsCalled(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clock := newPolClock(dispNow)
		rt := turnframe.New(store, turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound),
			turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: arrBound / 2}))
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
		})
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(context.Background(), rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(h.callsOf("k-charge"), 1) // called: nothing to repeat
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
	})
}
