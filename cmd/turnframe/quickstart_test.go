package main

import (
	"context"
	"log"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// quickstart is the README's quick start, word for word between the README
// markers: TestReadmeQuickStart checks that the two agree, so the README
// shows code that compiles, and runs it against a local payments server.
//
// README:begin
func quickstart(ctx context.Context, paymentsURL string) error {
	store, err := sqlitestore.Open(ctx, "app.db") // creates the file and its schema
	if err != nil {
		return err
	}
	defer store.Close()
	rt := turnframe.New(store)

	// One user turn: store it, admit its command under a key, run it, answer.
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "A table for two, please")
	if err != nil {
		return err
	}
	cmd := turnframe.Command{Key: "booking-42/deposit", Case: "booking/42", Name: "book", Payload: []byte(`{"cents":2000}`)}
	if _, err := rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{cmd}}); err != nil {
		return err
	}
	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		// The event and the charge to send commit in one transaction, or neither does.
		return turnframe.Commit(
			[]turnframe.Event{{Case: call.Command.Case, Type: "booking.made", Data: call.Command.Payload}},
			turnframe.OutboxMessage{Destination: "payments", Payload: call.Command.Payload})
	})
	if _, err := rt.Execute(ctx, "acme", turn, book); err != nil {
		return err // a crash or an error here is resumed by key later: it never runs twice
	}
	if err := rt.Deliver(ctx, "acme", turn, "Booked: table for two."); err != nil {
		return err
	}

	// Your own loop sends the outbox; turnframe starts no goroutine of its own.
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": paymentsURL})
	if err != nil {
		return err
	}
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "web-1"})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if _, err := d.RunOnce(ctx, time.Now()); err != nil {
			log.Print(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// README:end
