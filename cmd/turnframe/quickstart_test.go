package main

import (
	"context"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// quickstart is the README's quick start, word for word between the README
// markers: TestReadmeQuickStart checks that the two agree, so the README
// shows code that compiles, and runs it against a local payments server.
//
// README:begin
func quickstart(ctx context.Context, paymentsURL string) error {
	store, err := sqlitestore.Open(ctx, "app.db") // creates the file and turnframe's schema
	if err != nil {
		return err
	}
	defer store.Close()
	if err := createBookings(ctx, store); err != nil { // the app's own table, in the same file
		return err
	}
	rt := turnframe.New(store)

	// One handler per command name. The booking row, its event and the charge
	// to send commit in one transaction, or none of them does.
	var mux turnframe.Mux
	mux.RegisterFunc("book", func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(
			[]turnframe.Event{{Case: call.Command.Case, Type: "booking.made", Data: call.Command.Payload}},
			turnframe.OutboxMessage{Destination: "payments", Payload: call.Command.Payload},
		).With(func(ctx context.Context, tx turnframe.Tx) error {
			sqlTx, _ := sqlitestore.SQLTx(tx)
			_, err := sqlTx.ExecContext(ctx, `INSERT INTO bookings (booking, deposit) VALUES (?, ?)`, call.Command.Case, call.Command.Payload)
			return err
		})
	})

	// One user turn: store it under the chat platform's message id, admit its
	// command under a key, run it, answer. A platform that saw no quick answer
	// delivers the message again: ReceiveMessage then finds the first turn, as
	// long as the redelivery names the same conversation — keep the chat's
	// ConversationID in your own table (a new one each time is ErrConflict).
	msg, err := rt.ReceiveMessage(ctx, turnframe.Inbound{Account: "acme", Conversation: rt.NewConversationID(),
		MessageID: "update-4711", Text: "A table for two, please"})
	if err != nil {
		return err
	}
	if msg.Redelivered {
		return nil // its first delivery answers it (msg.Response, once it did): nothing runs twice
	}
	turn := msg.Turn
	cmd := turnframe.Command{Key: "booking-42/deposit", Case: "booking/42", Name: "book", Payload: []byte(`{"cents":2000}`)}
	plan, err := rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{cmd}})
	if err != nil {
		return err
	}
	if _, err := rt.Execute(ctx, "acme", turn, &mux); err != nil {
		return err // a crash or an error here is resumed by key later: it never runs twice
	}
	answer := "Booked: table for two."
	if plan.Admissions[0].Repeated() {
		answer = "You already booked that table." // the same request again: nothing ran twice
	}
	if err := rt.Deliver(ctx, "acme", turn, answer); err != nil {
		return err
	}

	// Send the outbox until ctx ends: Run wakes as soon as this process
	// enqueues, and everything it starts has ended when it returns.
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": paymentsURL})
	if err != nil {
		return err
	}
	return turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "web-1"}).Run(ctx)
}

func createBookings(ctx context.Context, store *sqlitestore.Store) error {
	tx, err := store.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bookings (booking TEXT PRIMARY KEY, deposit BLOB NOT NULL) STRICT`); err != nil {
		return err
	}
	return tx.Commit()
}

// README:end
