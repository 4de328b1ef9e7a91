package turnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// startup is an application's RecoveryHandler: it knows how to act on each
// decision, using the same Runtime and handler as its live turns.
type startup struct {
	rt      *turnframe.Runtime
	handler turnframe.Handler
}

func (s startup) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	fmt.Println("restart interpretation of", m.Turn.Time().Format(time.TimeOnly))
	return s.rt.Abandon(ctx, m.Account, m.Turn, "restarted") // a real application interprets the text again
}

func (s startup) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	report, err := s.rt.Execute(ctx, m.Account, m.Turn, s.handler) // resumed by key (I14)
	if err != nil {
		return err
	}
	fmt.Println("resumed", len(a.Entries), "command(s); phase now", report.Phase)
	return nil
}

func (s startup) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	fmt.Println("regenerate from", len(a.Events), "event(s) and", len(a.AnswerTasks), "question(s)")
	return s.rt.Deliver(ctx, m.Account, m.Turn, "Here is where things stand.")
}

func (s startup) ReconcileExternal(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	for _, e := range a.Entries {
		fmt.Println("ask the remote about", e.Key) // never run it again (I15)
		if err := s.rt.ReconcileCommand(ctx, m.Account, e.Key, turnframe.VerdictCompleted, ""); err != nil {
			return err
		}
	}
	return nil
}

// At start-up, before any new turn runs, a sweep decides what every turn the
// last process left unfinished needs, and the application acts on it. Here a
// previous process left one turn planned and another waiting for its answer.
func ExampleRecovery_Sweep() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	const account turnframe.AccountID = "acme"
	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked"}})
	})
	clock := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

	// The previous process: one turn planned, one committed, then a crash.
	before := turnframe.New(store, turnframe.WithClock(clock))
	planned, _ := before.Receive(ctx, account, before.NewConversationID(), "book 12A")
	before.Plan(ctx, account, planned, turnframe.Plan{Commands: []turnframe.Command{{Key: "b-1", Case: "flight/7", Name: "book"}}})
	committed, _ := before.Receive(ctx, account, before.NewConversationID(), "book 14C. is there wifi?")
	before.Plan(ctx, account, committed, turnframe.Plan{
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Words: turnframe.WordRange{Start: 10, End: 24}}}},
		Commands:      []turnframe.Command{{Key: "b-2", Case: "flight/8", Name: "book"}},
	})
	before.Execute(ctx, account, committed, book)

	// The new process, at start-up.
	rt := turnframe.New(store, turnframe.WithClock(clock))
	report, err := turnframe.NewRecovery(store).Sweep(ctx, turnframe.RecoveryScope{}, 100, startup{rt: rt, handler: book})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(report.Turns, "turn(s),", len(report.Failures), "failure(s)")
	// Output:
	// resumed 1 command(s); phase now committed
	// regenerate from 1 event(s) and 1 question(s)
	// 2 turn(s), 0 failure(s)
}
