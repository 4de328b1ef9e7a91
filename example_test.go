package turnframe_test

// The main entry points, each as a runnable example: a turn through the
// Runtime, an outbox through the Dispatcher, start-up through Recovery.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// A whole turn: the user's message is received, the application plans one
// command under an idempotency key, the handler books the seat and asks for a
// charge, and the answer is delivered. Running the turn again, as recovery
// would after a crash, recognises the key and runs nothing twice. The clock
// and the ids are fixed here so the output never changes; in production use
// New(store) and time.Now.
func ExampleRuntime() {
	ctx := context.Background()
	store := memstore.New(memstore.WithIDGenerator(turnframe.NewIDGeneratorFrom(rand.NewChaCha8([32]byte{1}))))
	defer store.Close()
	clock := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	rt := turnframe.New(store,
		turnframe.WithClock(clock),
		turnframe.WithIDGenerator(turnframe.NewIDGeneratorFrom(rand.NewChaCha8([32]byte{2}))),
		turnframe.WithCommandTimeout(10*time.Second),
	)
	const account turnframe.AccountID = "acme"

	turn, err := rt.Receive(ctx, account, rt.NewConversationID(), "Book seat 12A on flight 7, please.")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("turn", turn)

	planned, err := rt.Plan(ctx, account, turn, turnframe.Plan{
		LoadedCases: []turnframe.CaseKey{"flight/7"},
		Commands: []turnframe.Command{
			{Key: "acme-booking-1001", Case: "flight/7", Name: "book_seat", Payload: []byte(`{"seat":"12A"}`)},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	admitted := planned.Admissions[0]
	fmt.Println(admitted.Kind, admitted.Entry.Key, admitted.Entry.Status)

	// The handler decides against the case's current revision; its events and
	// outbox message are written with the journal entry in one transaction.
	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		if call.Revision != 0 {
			return turnframe.Reject("seat_taken")
		}
		return turnframe.Commit(
			[]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked", Data: call.Command.Payload}},
			turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":129}`)},
		)
	})
	report, err := rt.Execute(ctx, account, turn, book)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range report.Results {
		fmt.Println(r.Key, r.Kind, len(r.EventIDs), "event(s)", len(r.OutboxIDs), "outbox row(s)")
	}
	fmt.Println("phase", report.Phase)

	// Executing again finds the key settled and runs nothing (I14).
	again, err := rt.Execute(ctx, account, turn, book)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("again:", again.Results[0].Kind)

	if err := rt.Deliver(ctx, account, turn, "Seat 12A is yours."); err != nil {
		fmt.Println(err)
		return
	}
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Account: account, Limit: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range rows {
		fmt.Println("outbox", row.Key, row.Destination, row.Status)
	}
	marker, err := store.TurnPhase(ctx, account, turn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("phase", marker.Phase)
	// Output:
	// turn 01KJMMA2G02J80CTVQH4TV1ETA
	// admitted_now acme-booking-1001 pending
	// acme-booking-1001 committed 1 event(s) 1 outbox row(s)
	// phase committed
	// again: skipped
	// outbox acme-booking-1001 payments pending
	// phase delivered
}

// The application owns the dispatch loop: turnframe starts nothing. Each
// sweep claims the rows that are due, sends them and settles them before
// RunOnce returns. In production the loop runs on a time.Ticker until the
// application shuts down, with now = time.Now(); here the clock is fixed and
// steps one second per sweep, so the output never changes.
func ExampleDispatcher() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// A turn's command committed, asking for two effects: a charge and a
	// receipt. Its outbox rows were written in the same transaction.
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	if _, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "pay order 7"},
		Admit:  []turnframe.Command{{Key: "order-7", Case: "order/7", Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{
			{Destination: "payments", Payload: []byte(`{"amount":100}`)},
			{Destination: "email", Payload: []byte("receipt")},
		},
	}); err != nil {
		fmt.Println(err)
		return
	}

	// The sender: an HTTPSender, or the application's own client. This one
	// finds the mail server busy once.
	mailBusy := true
	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		fmt.Printf("send %s %s Idempotency-Key=%s\n", e.Destination, e.Payload, e.RemoteKey())
		if e.Destination == "email" && mailBusy {
			mailBusy = false
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "smtp.421"}
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	dispatcher := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("worker-1"))

	for sweep := range 3 {
		report, err := dispatcher.RunOnce(ctx, now)
		switch {
		case err != nil:
			fmt.Println("the outbox could not be read:", err)
		case report.IsEmpty():
			fmt.Printf("sweep %d: nothing due\n", sweep)
		default:
			fmt.Printf("sweep %d: %d completed, %d retried, %d failed, %d unknown\n",
				sweep, len(report.Completed), len(report.Retried), len(report.Failed), len(report.Unknown))
		}
		now = now.Add(time.Second)
	}

	// Output:
	// send payments {"amount":100} Idempotency-Key=4.acme.order-7~1
	// send email receipt Idempotency-Key=4.acme.order-7~2
	// sweep 0: 1 completed, 1 retried, 0 failed, 0 unknown
	// send email receipt Idempotency-Key=4.acme.order-7~2
	// sweep 1: 1 completed, 0 retried, 0 failed, 0 unknown
	// sweep 2: nothing due
}

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

// At start-up, before any new turn runs, Recover settles what the last
// process left behind: claims whose lease ended, outcomes nobody knows, and
// turns cut short. Here the previous process left one turn planned, one
// committed but not answered, and the payment that turn asked for claimed
// by a dispatcher that died mid-send. The payments remote can be asked
// about a key, so its Verifier, not a blind resend, settles the row; the
// planned turn is resumed by key. Both clocks are fixed so the output never
// changes; in production use time.Now.
func ExampleRecovery_Recover() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	const account turnframe.AccountID = "acme"
	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked"}},
			turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":129}`)})
	})
	crashed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	restarted := crashed.Add(time.Hour)

	// The previous process: one turn planned, one committed, its payment
	// claimed by a dispatcher; then a crash.
	before := turnframe.New(store, turnframe.WithClock(func() time.Time { return crashed }))
	planned, _ := before.Receive(ctx, account, before.NewConversationID(), "book 12A")
	before.Plan(ctx, account, planned, turnframe.Plan{Commands: []turnframe.Command{{Key: "b-1", Case: "flight/7", Name: "book"}}})
	committed, _ := before.Receive(ctx, account, before.NewConversationID(), "book 14C. is there wifi?")
	before.Plan(ctx, account, committed, turnframe.Plan{
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Words: turnframe.WordRange{Start: 10, End: 24}}}},
		Commands:      []turnframe.Command{{Key: "b-2", Case: "flight/8", Name: "book"}},
	})
	before.Execute(ctx, account, committed, book)
	store.ClaimDue(ctx, crashed, 10, "worker-1", time.Minute) // the send may have left

	// The new process, at start-up.
	clock := func() time.Time { return restarted }
	rt := turnframe.New(store, turnframe.WithClock(clock))
	payments := turnframe.VerifierFunc(func(ctx context.Context, u turnframe.Uncertain) turnframe.Verification {
		fmt.Println("ask payments about", u.RemoteKey)
		return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ch_1001"}
	})
	recovery := turnframe.NewRecovery(store, turnframe.WithClock(clock),
		turnframe.WithDestination("payments", turnframe.Remote{Verifier: payments}))
	report, err := recovery.Recover(ctx, turnframe.RecoveryScope{}, startup{rt: rt, handler: book})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(report.Expired), "claim(s) expired")
	for _, p := range report.Policy {
		fmt.Println(p.Uncertain.Name, p.Uncertain.Key, p.Outcome, p.Code)
	}
	fmt.Println(report.Turns.Turns, "turn(s),", len(report.Turns.Failures), "failure(s),",
		len(report.NeedsIntervention), "waiting for a person")
	// Output:
	// ask payments about 4.acme.b-2
	// resumed 1 command(s); phase now committed
	// regenerate from 1 event(s) and 1 question(s)
	// 1 claim(s) expired
	// payments b-2 completed turnframe.policy.verified_happened
	// 2 turn(s), 0 failure(s), 0 waiting for a person
}

// A command's outcome is unknown: the card network did not answer the
// handler's charge. Nothing runs it again on its own (I15), and no Remote is
// declared for it, so it waits. Once a person has looked the charge up,
// Settle records what they found: one transaction, and a line in the audit
// trail naming who decided and why.
func ExampleRecovery_Settle() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	const account turnframe.AccountID = "acme"
	clock := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	rt := turnframe.New(store, turnframe.WithClock(clock))
	turn, _ := rt.Receive(ctx, account, rt.NewConversationID(), "pay invoice 1001")
	rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "pay-1001", Case: "invoice/1001", Name: "charge"}}})
	charge := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Unknown("req-77") // the request left; no answer came back
	})
	report, err := rt.Execute(ctx, account, turn, charge)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pay-1001", report.Results[0].Status)

	recovery := turnframe.NewRecovery(store, turnframe.WithClock(clock))
	err = recovery.Settle(ctx, turnframe.JournalSubject(account, "pay-1001"), turnframe.Decision{
		Verdict: turnframe.VerdictCompleted, RemoteRef: "ch_1001",
		Actor: "operator:alice", Note: "the card network shows the charge",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	entry, err := store.ByKey(ctx, account, "pay-1001")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pay-1001", entry.Status, entry.RemoteRef)
	history, err := store.History(ctx, turnframe.JournalSubject(account, "pay-1001"), 0, 100)
	if err != nil || len(history) == 0 {
		fmt.Println("no history:", err)
		return
	}
	last := history[len(history)-1]
	fmt.Printf("%s → %s by %s: %s\n", last.From, last.To, last.Actor, last.Note)
	// Output:
	// pay-1001 outcome_unknown
	// pay-1001 committed ch_1001
	// outcome_unknown → committed by operator:alice: the card network shows the charge
}

// One handler per command name: the Mux hands each command to the handler
// registered for its name, so the application writes no switch. A command
// whose name has no handler is rejected with CodeNoHandler, as any other
// refusal: it took no effect and the turn goes on.
func ExampleMux() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	const account turnframe.AccountID = "acme"
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }))

	var mux turnframe.Mux
	mux.RegisterFunc("book_seat", func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked", Data: call.Command.Payload}})
	})
	mux.RegisterFunc("send_receipt", func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "email", Payload: call.Command.Payload})
	})

	turn, _ := rt.Receive(ctx, account, rt.NewConversationID(), "Book 12A, mail me the receipt, and refund my last trip.")
	_, err := rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{
		{Key: "acme-seat-12A", Case: "flight/7", Name: "book_seat", Payload: []byte(`{"seat":"12A"}`)},
		{Key: "acme-receipt-12A", Case: "flight/7", Name: "send_receipt"},
		{Key: "acme-refund-6", Case: "flight/6", Name: "refund"},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := rt.Execute(ctx, account, turn, &mux)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range report.Results {
		if r.Code != "" {
			fmt.Println(r.Command, r.Kind, r.Code)
			continue
		}
		fmt.Println(r.Command, r.Kind)
	}
	fmt.Println("phase", report.Phase)
	// Output:
	// book_seat committed
	// send_receipt committed
	// refund rejected turnframe.mux.no_handler
	// phase committed
}

// A repeated message: the user sends "book 12A" twice. The second turn plans
// the same command under the same key; Plan says the key was admitted by
// the first turn and what became of it, so the answer can be truthful ("you
// already have it, since 12:00") instead of silent. Execute of the second
// turn runs nothing of it.
func ExampleRuntime_Plan() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	const account turnframe.AccountID = "acme"
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return clock }))
	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked"}})
	})
	seat := turnframe.Command{Key: "acme-seat-12A", Case: "flight/7", Name: "book_seat"}

	for _, text := range []string{"book 12A", "book 12A!!"} {
		turn, _ := rt.Receive(ctx, account, rt.NewConversationID(), text)
		report, err := rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{seat}})
		if err != nil {
			fmt.Println(err)
			return
		}
		a := report.Admissions[0]
		switch {
		case a.Kind == turnframe.AdmittedByAnotherTurn && a.Entry.Status == turnframe.JournalCommitted:
			fmt.Printf("%q: already done at %s, by an earlier turn\n", text, a.Entry.UpdatedAt.Format("15:04"))
		default:
			fmt.Printf("%q: %v\n", text, a.Kind)
		}
		executed, _ := rt.Execute(ctx, account, turn, book)
		fmt.Println("  ran here:", len(executed.Results))
		clock = clock.Add(time.Minute)
	}
	// Output:
	// "book 12A": admitted_now
	//   ran here: 1
	// "book 12A!!": already done at 12:00, by an earlier turn
	//   ran here: 0
}
