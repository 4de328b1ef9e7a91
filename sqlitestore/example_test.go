package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// An application that keeps its own tables in the store's file writes a row
// of its own, a command's event and its outbox row in one transaction: all of
// them commit, or none does.
func ExampleStore_ApplyTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "turnframe-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "app.db")) // creates the file and the schema
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// The application's own table, in the same file.
	tx, err := store.BeginTx(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS seats (seat TEXT PRIMARY KEY, holder TEXT NOT NULL) STRICT`)
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	// A turn whose command is running (normally Runtime does this part).
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	_, err = store.Apply(ctx, turnframe.Write{
		Account: "acme", Turn: turn, Now: now, Phase: turnframe.PhaseExecuting,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "seat 12A please"},
		Admit:  []turnframe.Command{{Key: "book-12A", Case: "flight/7", Name: "book"}},
		Settle: []turnframe.Settlement{{Key: "book-12A", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The commit: the app's row, the event and the outbox row together.
	tx, err = store.BeginTx(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO seats (seat, holder) VALUES ('12A', 'acme')`); err != nil {
		fmt.Println(err)
		return
	}
	applied, err := store.ApplyTx(ctx, tx, turnframe.Write{
		Account: "acme", Turn: turn, Now: now.Add(time.Second), Phase: turnframe.PhaseCommitted,
		Settle: []turnframe.Settlement{{Key: "book-12A", To: turnframe.JournalCommitted, Attempt: attempt}},
		Events: []turnframe.Event{{Case: "flight/7", Type: "seat.booked"}},
		Outbox: []turnframe.OutboxMessage{{Destination: "payments", Payload: []byte(`{"cents":12900}`)}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("event revision", applied.Events[0].Revision)
	fmt.Println("outbox key", applied.Outbox[0].Key)
	rows, _ := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
	fmt.Println("outbox rows", len(rows), rows[0].Status)
	// Output:
	// event revision 1
	// outbox key book-12A
	// outbox rows 1 pending
}
