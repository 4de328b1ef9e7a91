package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// An application that keeps its own tables in the store's database commits
// its rows, its events and its outbox rows together, or none of them.
func TestApplyTx(t *testing.T) {
	tests := []struct {
		name   string
		commit bool
		rows   int // rows of each kind after the transaction ends
	}{
		{name: "CommitWritesAppRowEventsAndOutbox", commit: true, rows: 1},
		{name: "RollbackWritesNone", commit: false, rows: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s, tx, commit := appTxWithItsOwnRow(t)
			applied, err := s.ApplyTx(ctx, tx, commit)
			is.NoErr(err)                    // the commit's write, in the app's transaction
			is.Equal(len(applied.Outbox), 1) // one row enqueued

			is.Equal(count(t, s, "bookings"), 0) // nothing visible before the transaction ends
			is.Equal(count(t, s, "outbox"), 0)   // nor the row
			if tc.commit {
				is.NoErr(tx.Commit(ctx)) // the app commits
			} else {
				is.NoErr(tx.Rollback(ctx)) // the app rolls back
			}
			is.Equal(count(t, s, "bookings"), tc.rows) // the app's row
			is.Equal(count(t, s, "events"), tc.rows)   // the commit's event
			is.Equal(count(t, s, "outbox"), tc.rows)   // the commit's row
			entry, err := s.ByKey(ctx, "acme", "k1")
			is.NoErr(err) // the entry
			want := turnframe.JournalExecuting
			if tc.commit {
				want = turnframe.JournalCommitted
			}
			is.Equal(entry.Status, want) // the journal moved with the rest, or not at all
		})
	}

	t.Run("ARefusedWriteUndoesItselfAndKeepsTheAppsRows", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s, tx, commit := appTxWithItsOwnRow(t)
		moved := commit
		moved.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{moved.Events[0].Case: 7} // refused inside the transaction
		_, err := s.ApplyTx(ctx, tx, moved)
		is.True(errors.Is(err, turnframe.ErrConflict)) // the revision moved
		_, err = s.ApplyTx(ctx, tx, commit)
		is.NoErr(err)                        // the same transaction goes on
		is.NoErr(tx.Commit(ctx))             // and commits
		is.Equal(count(t, s, "bookings"), 1) // the app's row stayed
		is.Equal(count(t, s, "events"), 1)   // one commit's events, not two
		is.Equal(count(t, s, "outbox"), 1)   // one commit's row
	})

	t.Run("AFailedStatementUndoesTheWriteAndKeepsTheAppsRows", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s, tx, commit := appTxWithItsOwnRow(t)
		failing := commit
		failing.App = func(ctx context.Context, atx turnframe.Tx) error {
			ptx, _ := pgstore.PgxTx(atx)
			_, err := ptx.Exec(ctx, `INSERT INTO bookings (seat) VALUES ('1A')`) // a duplicate: aborts the savepoint
			return err
		}
		_, err := s.ApplyTx(ctx, tx, failing)
		is.True(errors.Is(err, turnframe.ErrAppWrite)) // the app's statement failed
		_, err = s.ApplyTx(ctx, tx, commit)
		is.NoErr(err)                        // the transaction is usable again
		is.NoErr(tx.Commit(ctx))             // and commits
		is.Equal(count(t, s, "bookings"), 1) // the app's first row stayed
		is.Equal(count(t, s, "outbox"), 1)   // the second Write's row
	})

	t.Run("InvalidWriteIsRefusedBeforeWriting", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s := mustOpen(t)
		tx, err := s.BeginTx(ctx)
		is.NoErr(err) // the app's transaction
		defer tx.Rollback(ctx)
		_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme"})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // no turn, no time
		_, err = s.ApplyTx(ctx, nil, turnframe.Write{Account: "acme", Turn: turnframe.NewIDGenerator().TurnID(base), Now: base})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // no transaction
	})
}

// appTxWithItsOwnRow opens a store whose schema holds the application's own
// table, prepares a turn whose command is running, and begins a transaction
// that has written one row of the application's. It returns the store, the
// transaction (rolled back at the end of the test unless committed) and the
// Write that commits the command with one event and one outbox row.
func appTxWithItsOwnRow(t *testing.T) (*pgstore.Store, pgx.Tx, turnframe.Write) {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t)
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE bookings (seat text PRIMARY KEY)`); err != nil {
		t.Fatalf("create the app's table: %v", err)
	}
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "book"},
		Admit:  []turnframe.Command{{Key: "k1", Case: "seat/1A", Name: "book"}},
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	if err != nil {
		t.Fatalf("prepare the turn: %v", err)
	}
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `INSERT INTO bookings (seat) VALUES ('1A')`); err != nil {
		t.Fatalf("the app's row: %v", err)
	}
	return s, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted, Attempt: attempt}},
		Events: []turnframe.Event{{Case: "seat/1A", Type: "booked"}},
		Outbox: []turnframe.OutboxMessage{{Destination: "payments"}},
	}
}

// count counts the committed rows of table.
func count(t *testing.T, s *pgstore.Store, table string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}
