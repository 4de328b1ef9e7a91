package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// arrResent leaves a command "k-charge" on case card/1 resent by the policy
// at dispNow + a minute, after its first call reached remote and its answer
// was lost (handler h's first call), and returns its turn, the runtime and
// recovery over store, and the options they share.
func arrResent(t *testing.T, store turnframe.Store, clock *polClock, h *rtHandler) (turnframe.TurnID, *turnframe.Runtime, *turnframe.Recovery, []turnframe.Option) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound),
		turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: arrWindow})}
	rt := turnframe.New(store, opts...)
	rec := turnframe.NewRecovery(store, opts...)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
	_, err := rt.Execute(ctx, rtAccount, turn, h)
	is.NoErr(err)
	is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // the first call's answer was lost
	clock.Add(time.Minute)
	report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
	is.NoErr(err)
	is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // the remote still remembers the key
	return turn, rt, rec, opts
}

// arrEscalated runs one Recover and checks that it escalates the withheld
// resend of "k-charge", though its window still runs.
func arrEscalated(t *testing.T, store turnframe.Store, rec *turnframe.Recovery) {
	t.Helper()
	is := is.New(t)
	report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, polNoResume{})
	is.NoErr(err)
	is.Equal(report.Policy[0].Outcome, turnframe.PolicyEscalated) // a person decides
	is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention)
}

// A resend taken up with a second more than the command timeout left of
// its window passes the check at the take-up; the store then takes two
// seconds to grant the take. The handler, called after it, may still take
// the whole command timeout to reach the remote, which by then forgot the
// key. The window is judged again when the call starts: the resend is
// withheld.
func TestACommandResendWhoseCallStartsTooLateIsWithheld(t *testing.T) {
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
		clock.Add(arrWindow - time.Minute - arrBound - time.Second) // in time, at the take-up

		slow := &rtOnFirstTake{Store: store, meanwhile: func() { clock.Add(2 * time.Second) }}
		_, err := turnframe.New(slow, opts...).Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		arrWithheld(t, store, rec, remote, h, 1) // withheld: the handler not called again
	})
}

// A resend taken up with two command timeouts left of its window calls
// its handler, which reaches the remote in time; its commit finds the case
// moved, and the handler would run again, the same request under the same
// key, reaching the remote only as it forgets the key. The re-run is a
// resend too, judged by when it may arrive: withheld.
func TestACommitConflictReRunOfAResendThatWouldArriveTooLateIsWithheld(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		remote := newArrRemote(clock)
		var bump func()
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
			if n > 1 {
				clock.Add(arrBound) // each call takes all its time to arrive
			}
			remote.receive(string(call.Command.Key))
			switch n {
			case 1:
				return turnframe.Unknown("") // the charge landed, its answer was lost
			case 2:
				bump() // the case moves under the resend's commit
			}
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
		})
		turn, rt, rec, _ := arrResent(t, store, clock, h)
		other := turnframe.New(store, turnframe.WithClock(clock.Now))
		bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "card/1", "bump"))
		bump = func() {
			_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript))
			is.NoErr(err)
		}
		clock.Add(arrWindow - time.Minute - 2*arrBound) // in time for one call, not for two

		_, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		arrWithheld(t, store, rec, remote, h, 2) // the resend ran; its re-run was withheld
	})
}

// A first send's re-run after a commit conflict is judged from the
// attempt's first call, not from the admission: the remote cannot have had
// the key before that call, so a command first run long after it was
// admitted, past the window counted from then, is still run again.
func TestACommitConflictReRunOfAFirstSendIsJudgedFromItsFirstCall(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock, remote, opts := arrCharge()
		rt := turnframe.New(store, opts...)
		other := turnframe.New(store, turnframe.WithClock(clock.Now))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "card/1", "bump"))
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
			clock.Add(arrBound) // each call takes all its time to arrive
			remote.receive(string(call.Command.Key))
			if n == 1 { // the case moves under the first commit
				_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript))
				is.NoErr(err)
			}
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
		})
		clock.Add(2 * arrWindow) // first run long after the admission

		_, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(h.callsOf("k-charge"), 2)      // run again: the remote remembers the key from the first call
		is.Equal(remote.applied("k-charge"), 1) // and answers the re-run as the first
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
	})
}
