package turnframe_test

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

	entries, err := rt.Plan(ctx, account, turn, turnframe.Plan{
		LoadedCases: []turnframe.CaseKey{"flight/7"},
		Commands: []turnframe.Command{
			{Key: "acme-booking-1001", Case: "flight/7", Name: "book_seat", Payload: []byte(`{"seat":"12A"}`)},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("admitted", entries[0].Key, entries[0].Status)

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
	// admitted acme-booking-1001 pending
	// acme-booking-1001 committed 1 event(s) 1 outbox row(s)
	// phase committed
	// again: skipped
	// outbox acme-booking-1001 payments pending
	// phase delivered
}
