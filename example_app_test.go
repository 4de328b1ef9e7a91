package turnframe_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The application's own rows in the commit: the handler's Commit carries a
// write to the app's bookings table, in the same SQLite file, which runs in
// the transaction that commits the command. The row exists if and only if
// the command committed; an error from the write commits nothing at all.
func ExampleOutcome_With() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "turnframe-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// The app's own table, in the same file (its schema is the app's).
	tx, err := store.BeginTx(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = tx.ExecContext(ctx, `CREATE TABLE bookings (seat TEXT PRIMARY KEY, command TEXT NOT NULL) STRICT`)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	rt := turnframe.New(store)
	const account turnframe.AccountID = "acme"
	turn, err := rt.Receive(ctx, account, rt.NewConversationID(), "Book seat 12A on flight 7.")
	if err == nil {
		_, err = rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{
			{Key: "acme-booking-1001", Case: "flight/7", Name: "book_seat", Payload: []byte("12A")},
		}})
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	book := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		seat, key := string(call.Command.Payload), string(call.Command.Key)
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.booked"}}).
			With(func(ctx context.Context, tx turnframe.Tx) error {
				sqlTx, _ := sqlitestore.SQLTx(tx)
				_, err := sqlTx.ExecContext(ctx, `INSERT INTO bookings (seat, command) VALUES (?, ?)`, seat, key)
				return err
			})
	})
	report, err := rt.Execute(ctx, account, turn, book)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(report.Results[0].Key, report.Results[0].Kind)

	var seat, command string
	if err := store.ReadDB().QueryRowContext(ctx, `SELECT seat, command FROM bookings`).Scan(&seat, &command); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("booked", seat, "by", command)
	// Output:
	// acme-booking-1001 committed
	// booked 12A by acme-booking-1001
}
