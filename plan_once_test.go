package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// rtReinterpreter is a RecoveryHandler whose RestartInterpretation does what
// an application does: it interprets the turn's text again (here a model
// that reads "a window seat" as 12A one time and 14F the next, keyed by
// content as example_test.go keys "acme-seat-12A"), plans, executes and
// delivers. interpreted, when not nil, is closed once it has interpreted;
// it then waits for proceed before it plans.
type rtReinterpreter struct {
	rt          *turnframe.Runtime
	h           turnframe.Handler
	seat        string
	interpreted chan struct{}
	proceed     chan struct{}
	planned     chan struct{} // when not nil, closed once planned; then waits for carryOn
	carryOn     chan struct{}
	planErr     error
}

func (a *rtReinterpreter) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	plan := turnframe.Plan{Commands: []turnframe.Command{{
		Key: turnframe.IdempotencyKey("acme-seat-" + a.seat), Case: "flight/7", Name: "book_seat", Payload: []byte(a.seat)}}}
	if a.interpreted != nil {
		close(a.interpreted)
		<-a.proceed
	}
	if _, err := a.rt.Plan(ctx, m.Account, m.Turn, plan); err != nil {
		a.planErr = err
		return err
	}
	if a.planned != nil {
		close(a.planned)
		<-a.carryOn
	}
	if _, err := a.rt.Execute(ctx, m.Account, m.Turn, a.h); err != nil {
		return err
	}
	return a.rt.Deliver(ctx, m.Account, m.Turn, "booked "+a.seat)
}

func (a *rtReinterpreter) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	_, err := a.rt.Execute(ctx, m.Account, m.Turn, a.h)
	return err
}

func (a *rtReinterpreter) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return a.rt.Deliver(ctx, m.Account, m.Turn, "done")
}

// rtTwoProcesses opens one SQLite file twice, as two processes would.
func rtTwoProcesses(t *testing.T) (a, b *sqlitestore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tf.db")
	open := func() *sqlitestore.Store {
		s, err := sqlitestore.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}

// rtAirline is a handler booking the seat a command's payload names, and a
// function returning a copy of its bookings by seat.
func rtAirline() (turnframe.Handler, func() map[string]int) {
	var mu sync.Mutex
	booked := map[string]int{}
	h := turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		mu.Lock()
		booked[string(call.Command.Payload)]++
		mu.Unlock()
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked", Data: call.Command.Payload}})
	})
	return h, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(booked)
	}
}

// Two processes start at once on one file after a crash left a turn
// received and never planned: each one's start-up Recover decides
// RestartInterpretation for it and hands it to its handler, and each
// interprets the message again — a model need not read it the same way
// twice. The first plan lands; the second, another reading (another seat),
// is refused: a turn is interpreted once, and one message books one seat.
// Before, Plan accepted a second plan of a Planned turn and added its
// commands, and both ran.
func TestTwoStartUpPassesInterpretATurnOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	storeA, storeB := rtTwoProcesses(t)
	quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))

	// The crashed process: it received the message and died interpreting it.
	crashed := turnframe.New(storeA, quiet)
	turn, err := crashed.Receive(ctx, rtAccount, crashed.NewConversationID(), "book me a window seat on flight 7")
	is.NoErr(err)

	airline, booked := rtAirline()

	// Process A's start-up pass: it interprets (slowly, as a model does).
	hA := &rtReinterpreter{rt: turnframe.New(storeA, quiet), h: airline, seat: "12A",
		interpreted: make(chan struct{}), proceed: make(chan struct{})}
	doneA := make(chan error, 1)
	go func() {
		_, err := turnframe.NewRecovery(storeA, quiet).Recover(ctx, turnframe.RecoveryScope{}, hA)
		doneA <- err
	}()
	select {
	case <-hA.interpreted:
	case <-time.After(10 * time.Second):
		t.Fatal("process A never reached RestartInterpretation")
	}

	// Process B's start-up pass meanwhile: it reads the model differently,
	// and plans first.
	hB := &rtReinterpreter{rt: turnframe.New(storeB, quiet), h: airline, seat: "14F",
		planned: make(chan struct{}), carryOn: make(chan struct{})}
	doneB := make(chan turnframe.RecoverReport, 1)
	go func() {
		rep, err := turnframe.NewRecovery(storeB, quiet).Recover(ctx, turnframe.RecoveryScope{}, hB)
		if err != nil {
			t.Errorf("B's pass: %v", err)
		}
		doneB <- rep
	}()
	select {
	case <-hB.planned:
	case <-time.After(10 * time.Second):
		t.Fatal("process B never planned")
	}
	is.NoErr(hB.planErr) // B's plan landed

	close(hA.proceed) // A's interpretation arrives now, before either executes
	select {
	case err := <-doneA:
		is.NoErr(err)
	case <-time.After(10 * time.Second):
		t.Fatal("process A's pass never ended")
	}
	close(hB.carryOn)
	select {
	case rep := <-doneB:
		is.Equal(rep.Turns.Actions[turnframe.ActionRestartInterpretation], 1)
	case <-time.After(10 * time.Second):
		t.Fatal("process B's pass never ended")
	}

	entries, err := storeA.ForTurn(ctx, rtAccount, turn)
	is.NoErr(err)
	t.Logf("entries of the turn: %d; bookings: %v; A's plan: %v", len(entries), booked(), hA.planErr)
	is.Equal(len(entries), 1)  // one message, one interpretation admitted
	is.Equal(len(booked()), 1) // one seat booked for one message
}

// A second process starts while the first is serving (a rolling deploy):
// its Recovery.Run's first pass hands the first process's turn in flight —
// received, being interpreted — to RestartInterpretation, and the handler
// plans its reading. The serving process's own plan, another reading, is
// then refused, and its Execute runs only the one plan: one message, one
// seat.
func TestAStartUpPassAndTheAppInterpretATurnOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	storeA, storeB := rtTwoProcesses(t)
	quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
	airline, booked := rtAirline()

	// Process A serves: it received the message and is interpreting it now.
	app := turnframe.New(storeA, quiet)
	turn, err := app.Receive(ctx, rtAccount, app.NewConversationID(), "book me a window seat on flight 7")
	is.NoErr(err)

	// Process B starts, as the README says: a recovery loop from start-up.
	hB := &rtReinterpreter{rt: turnframe.New(storeB, quiet), h: airline, seat: "14F",
		planned: make(chan struct{}), carryOn: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() {
		runDone <- turnframe.NewRecovery(storeB, quiet).Run(runCtx, turnframe.RecoveryLoop{Handler: hB, Interval: time.Hour})
	}()
	select {
	case <-hB.planned:
	case <-time.After(10 * time.Second):
		t.Fatal("B's first pass never planned")
	}

	// A's interpretation comes back: it plans, executes and answers.
	_, err = app.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{{
		Key: "acme-seat-12A", Case: "flight/7", Name: "book_seat", Payload: []byte("12A")}}})
	planErr := err
	_, err = app.Execute(ctx, rtAccount, turn, airline)
	is.NoErr(err)
	close(hB.carryOn)
	stop()
	select {
	case <-runDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Run never returned")
	}
	t.Logf("app's plan: %v; bookings: %v", planErr, booked())
	is.Equal(len(booked()), 1) // one message, one seat
}

// A Plan of a turn planned already is a repeat of its plan, as after a
// crash or a Plan whose answer was lost: the same commands are reported
// AdmittedByThisTurn and admitted nothing new; a command the turn never
// admitted is another reading of its message, ErrConflict, and nothing of
// that Plan is written.
func TestAPlanOfAPlannedTurnIsARepeatOrRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		a, b := rtCmd("k-a", "flight/7", "book"), rtCmd("k-b", "flight/8", "book")
		turn := rtPlanned(t, rt, rtAccount, a, b)

		report, err := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{a, b}})
		is.NoErr(err) // the same plan again is a repeat
		for _, adm := range report.Admissions {
			is.Equal(adm.Kind, turnframe.AdmittedByThisTurn) // each command is the turn's already
		}

		_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{a, rtCmd("k-c", "flight/9", "book")}})
		is.True(errors.Is(err, turnframe.ErrConflict)) // a command the turn never admitted: another reading
		_, err = store.ByKey(ctx, rtAccount, "k-c")
		is.True(errors.Is(err, turnframe.ErrNotFound)) // nothing of it written
		entries, err := store.ForTurn(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(len(entries), 2) // the turn holds its one plan

		calls := 0
		_, err = rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(hctx context.Context, call turnframe.Call) turnframe.Outcome {
			calls++
			return rtScript(hctx, call, 1)
		}))
		is.NoErr(err)
		is.Equal(calls, 2) // each command once
	})
}

// rtHookStore runs beforeApply(w) ahead of every Apply it forwards, and
// afterReplay once, after the next read of a replay record.
type rtHookStore struct {
	turnframe.Store
	beforeApply func(w turnframe.Write)
	afterReplay func()
}

func (h *rtHookStore) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if f := h.beforeApply; f != nil {
		f(w)
	}
	return h.Store.Apply(ctx, w)
}

func (h *rtHookStore) Replay(ctx context.Context, a turnframe.AccountID, t turnframe.TurnID) (turnframe.ReplayRecord, error) {
	rec, err := h.Store.Replay(ctx, a, t)
	if f := h.afterReplay; f != nil {
		h.afterReplay = nil
		f()
	}
	return rec, err
}

// A repeat Plan of a planned turn names a key another, live turn holds,
// and that turn is abandoned between the Plan's start and its Write: the
// store would adopt the entry into this turn, a new admission by a turn
// interpreted already. The store refuses it (Write.RepeatOnly), in the
// Write's own transaction, so no check-then-write window remains.
func TestARepeatPlanNeverAdoptsAKeyAbandonedMeanwhile(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		hs := &rtHookStore{Store: store}
		rt := turnframe.New(hs)
		other := turnframe.New(store)

		held := rtCmd("k-held", "flight/1", "book")
		holder := rtPlanned(t, other, rtAccount, held) // another message's turn holds k-held, pending
		mine := rtCmd("k-mine", "flight/2", "book")
		turn := rtPlanned(t, rt, rtAccount, mine) // this turn is planned with k-mine only

		hs.beforeApply = func(w turnframe.Write) {
			if w.Turn == turn && w.ExpectPhase == turnframe.PhasePlanned {
				hs.beforeApply = nil
				is.NoErr(other.Abandon(ctx, rtAccount, holder, "user.left"))
			}
		}
		report, err := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{mine, held}})
		e, _ := store.ByKey(ctx, rtAccount, "k-held")
		t.Logf("repeat plan err=%v admissions=%+v; k-held now in turn %v (this turn %v)", err, report.Admissions, e.Turn, turn)
		is.True(errors.Is(err, turnframe.ErrConflict)) // a repeat that would adopt is another reading
		is.Equal(e.Turn, holder)                       // and k-held never moved to this turn
	})
}

// Deliver writes the replay record expecting the phase it read it in, and
// only a first Plan, which moves the phase, changes the record: a repeat
// Plan of a Planned turn (Planned → Planned) leaves the record as the
// first plan wrote it. Before, a repeat replaced the record, and a Deliver
// landing after it under the same phase wrote the old one back: the
// repeat's loaded cases were lost though it succeeded.
func TestARepeatPlanKeepsTheFirstPlansRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		hs := &rtHookStore{Store: store}
		rt := turnframe.New(hs)
		other := turnframe.New(store)

		pay := rtCmd("k-pay", "acct/1", "pay")
		pay.NeedsApproval = true
		turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "pay the bill")
		is.NoErr(err)
		_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{pay}})
		is.NoErr(err)

		hs.afterReplay = func() {
			_, err := other.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{pay},
				LoadedCases: []turnframe.CaseKey{"acct/1"}})
			is.NoErr(err) // the repeat lands: it admits nothing new
			rec, err := store.Replay(ctx, rtAccount, turn)
			is.NoErr(err)
			is.Equal(len(rec.LoadedCases), 0) // and leaves the record as the first plan wrote it
		}
		is.NoErr(rt.Deliver(ctx, rtAccount, turn, "waiting for your approval"))
		rec, err := store.Replay(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(len(rec.LoadedCases), 0)                   // the repeat wrote no record of its own: the first plan's stands
		is.Equal(rec.Response, "waiting for your approval") // and Deliver's answer is on it
	})
}

// A Plan whose answer was lost is repeated. Its command's key is held by
// an earlier turn whose entry committed, and that turn was abandoned since:
// a settled entry is never adopted, so the identical repeat admits nothing
// new and is accepted. (A check before the write refused it, taking any
// abandoned holder for an adoption.)
func TestAnIdenticalRepeatIsAcceptedAfterTheHolderOfASettledKeyWasAbandoned(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		book := rtCmd("k-book", "flight/1", "book")
		first := rtPlanned(t, rt, rtAccount, book)
		_, err := rt.Execute(ctx, rtAccount, first, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Commit(nil)
		}))
		is.NoErr(err)

		turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book it (again)")
		is.NoErr(err)
		p := turnframe.Plan{Commands: []turnframe.Command{book}}
		rep, err := rt.Plan(ctx, rtAccount, turn, p)
		is.NoErr(err)
		is.Equal(rep.Admissions[0].Kind, turnframe.AdmittedByAnotherTurn)

		is.NoErr(rt.Abandon(ctx, rtAccount, first, "user.left")) // the first turn's answer never went out

		rep2, err := rt.Plan(ctx, rtAccount, turn, p) // the same Plan again: its answer was lost
		t.Logf("repeat: err=%v admissions=%v; k-book is %v in %v", err, rep2.Admissions, rtEntry(t, store, "k-book").Status, rtEntry(t, store, "k-book").Turn == first)
		is.NoErr(err) // it admits nothing new: the settled entry stays the first turn's
	})
}
