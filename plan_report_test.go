package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// planFixture is one store, a runtime over it on a clock the test moves,
// and the handler every Execute of the test uses.
type planFixture struct {
	store turnframe.Store
	rt    *turnframe.Runtime
	clock *stepClock
	h     *rtHandler
}

var planT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// received receives a new turn.
func (f planFixture) received(t *testing.T) turnframe.TurnID {
	t.Helper()
	turn, err := f.rt.Receive(context.Background(), rtAccount, f.rt.NewConversationID(), "do it")
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return turn
}

// planned receives a turn and plans cmd in it.
func (f planFixture) planned(t *testing.T, cmd turnframe.Command) turnframe.TurnID {
	t.Helper()
	turn := f.received(t)
	if _, err := f.rt.Plan(context.Background(), rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{cmd}}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return turn
}

// executed plans cmd in a new turn and executes it.
func (f planFixture) executed(t *testing.T, cmd turnframe.Command) turnframe.TurnID {
	t.Helper()
	turn := f.planned(t, cmd)
	if _, err := f.rt.Execute(context.Background(), rtAccount, turn, f.h); err != nil {
		t.Fatalf("execute: %v", err)
	}
	return turn
}

// abandonedWhileRunning plans cmd in a new turn, takes it for an attempt
// leased for a minute from planT0 (a process that then died), and abandons
// the turn.
func (f planFixture) abandonedWhileRunning(t *testing.T, cmd turnframe.Command) turnframe.TurnID {
	t.Helper()
	ctx := context.Background()
	turn := f.planned(t, cmd)
	_, err := f.store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: planT0, Phase: turnframe.PhaseExecuting,
		Settle: []turnframe.Settlement{{Key: cmd.Key, To: turnframe.JournalExecuting, Attempt: turnframe.NewIDGenerator().AttemptID(planT0), Lease: time.Minute}}})
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	if err := f.rt.Abandon(ctx, rtAccount, turn, "user.left"); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	return turn
}

func TestPlanSaysWhatWasAlreadyAdmitted(t *testing.T) {
	for _, tt := range []struct {
		name    string
		command string // the command's name, for rtScript
		// before leaves the key "k" as the case names it and returns the
		// turn holding it (zero for none) and the turn to plan it in.
		before   func(t *testing.T, f planFixture, cmd turnframe.Command) (from, turn turnframe.TurnID)
		kind     turnframe.AdmissionKind
		status   turnframe.JournalStatus
		code     string
		runsHere bool // Execute of the planning turn runs it
	}{
		{"a new key is admitted now", "book", func(t *testing.T, f planFixture, _ turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return turnframe.TurnID{}, f.received(t)
		}, turnframe.AdmittedNow, turnframe.JournalPending, "", true},
		{"a key another turn committed is already done", "book", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return f.executed(t, cmd), f.received(t)
		}, turnframe.AdmittedByAnotherTurn, turnframe.JournalCommitted, "", false},
		{"a key another turn rejected is already refused", "refuse", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return f.executed(t, cmd), f.received(t)
		}, turnframe.AdmittedByAnotherTurn, turnframe.JournalRejected, "sold_out", false},
		{"a key whose outcome another turn does not know is being verified", "charge", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return f.executed(t, cmd), f.received(t)
		}, turnframe.AdmittedByAnotherTurn, turnframe.JournalOutcomeUnknown, "", false},
		{"a key another turn has pending runs there", "book", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return f.planned(t, cmd), f.received(t)
		}, turnframe.AdmittedByAnotherTurn, turnframe.JournalPending, "", false},
		{"a key an abandoned turn never ran is adopted", "book", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			turn := f.planned(t, cmd)
			if err := f.rt.Abandon(context.Background(), rtAccount, turn, "user.left"); err != nil {
				t.Fatalf("abandon: %v", err)
			}
			return turn, f.received(t)
		}, turnframe.AdoptedFromAbandoned, turnframe.JournalPending, "", true},
		{"a key whose attempt died in an abandoned turn is adopted once its lease ended", "book", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			from := f.abandonedWhileRunning(t, cmd)
			f.clock.set(planT0.Add(2 * time.Minute))
			return from, f.received(t)
		}, turnframe.AdoptedFromAbandoned, turnframe.JournalExecuting, "", true},
		{"a key running under a live lease in an abandoned turn stays there", "book", func(t *testing.T, f planFixture, cmd turnframe.Command) (turnframe.TurnID, turnframe.TurnID) {
			return f.abandonedWhileRunning(t, cmd), f.received(t)
		}, turnframe.AdmittedByAnotherTurn, turnframe.JournalExecuting, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newStepClock(planT0)
				f := planFixture{store: store, rt: turnframe.New(store, turnframe.WithClock(clock.read)), clock: clock, h: rtNewHandler(rtScript)}
				cmd := rtCmd("k", "flight/7", tt.command)
				from, turn := tt.before(t, f, cmd)

				report, err := f.rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-new", "flight/8", "book"), cmd}})
				is.NoErr(err)                                              // plan
				is.Equal(len(report.Admissions), 2)                        // one per command
				is.Equal(report.Admissions[0].Kind, turnframe.AdmittedNow) // a fresh key beside it
				is.True(!report.Admissions[0].Repeated())                  // is no repeat
				is.Equal(report.Admissions[0].From, turnframe.TurnID{})    // and came from no turn
				got := report.Admissions[1]
				is.Equal(got.Kind, tt.kind)                                // what Plan did with the key
				is.Equal(got.Repeated(), tt.kind != turnframe.AdmittedNow) // a repeat unless admitted now
				is.Equal(got.From, from)                                   // the turn that held it before
				is.Equal(got.Entry.Key, cmd.Key)                           // its entry, in plan order
				is.Equal(got.Entry.Status, tt.status)                      // what became of it so far
				is.Equal(got.Entry.Code, tt.code)                          // and why
				is.Equal(got.Entry.Turn == turn, tt.runsHere)              // whose it is now
				is.Equal(report.Entries()[1], got.Entry)                   // Entries lists the same

				f.clock.set(planT0.Add(3 * time.Minute))
				before := f.h.callsOf(cmd.Key)
				_, err = f.rt.Execute(ctx, rtAccount, turn, f.h)
				is.NoErr(err)                                           // execute the planning turn
				is.Equal(f.h.callsOf(cmd.Key)-before == 1, tt.runsHere) // runs it only when it is this turn's
			})
		})
	}
}
