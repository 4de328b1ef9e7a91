package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// An application that keeps its own tables in the store's file commits its
// rows, its events and its outbox rows together, or none of them.
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
			is.NoErr(err)
			is.Equal(len(applied.Outbox), 1)

			// Nothing is visible to readers before the end of the transaction.
			is.Equal(count(t, s, "bookings"), 0)
			is.Equal(count(t, s, "outbox"), 0)
			if tc.commit {
				is.NoErr(tx.Commit())
			} else {
				is.NoErr(tx.Rollback())
			}
			is.Equal(count(t, s, "bookings"), tc.rows)
			is.Equal(count(t, s, "events"), tc.rows)
			is.Equal(count(t, s, "outbox"), tc.rows)
			entry, err := s.ByKey(ctx, "acme", "k1")
			is.NoErr(err)
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
		is.NoErr(err) // the same tx goes on
		is.NoErr(tx.Commit())
		is.Equal(count(t, s, "bookings"), 1) // the app's row stayed
		is.Equal(count(t, s, "events"), 1)   // one commit's events, not two
		is.Equal(count(t, s, "outbox"), 1)
	})

	t.Run("InvalidWriteIsRefusedBeforeWriting", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s := mustOpen(t)
		tx, err := s.BeginTx(ctx)
		is.NoErr(err)
		defer tx.Rollback()
		_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme"})
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
}

// appTxWithItsOwnRow opens a store whose file holds the application's own
// table, prepares a turn whose command is running, and begins a transaction
// that has written one row of the application's. It returns the store, the
// transaction (rolled back at the end of the test unless committed) and the
// Write that commits the command with one outbox row.
func appTxWithItsOwnRow(t *testing.T) (*sqlitestore.Store, *sql.Tx, turnframe.Write) {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx := context.Background()
	s := mustOpen(t)
	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, `CREATE TABLE bookings (seat TEXT PRIMARY KEY) STRICT`)
	is.NoErr(err)
	is.NoErr(tx.Commit())
	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	_, err = s.Apply(ctx, prepare)
	is.NoErr(err)
	tx, err = s.BeginTx(ctx)
	is.NoErr(err)
	t.Cleanup(func() { tx.Rollback() })
	_, err = tx.ExecContext(ctx, `INSERT INTO bookings (seat) VALUES ('1A')`)
	is.NoErr(err)
	return s, tx, commit
}

func count(t *testing.T, s *sqlitestore.Store, table string) int {
	t.Helper()
	var n int
	if err := s.ReadDB().QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// A second Store on the file (another process, say the CLI) opens and reads
// while the first holds a write transaction, and its writes wait for the
// busy timeout and then fail with ErrBusy, writing nothing.
func TestSecondStoreWhileWriteTxHeld(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	first := mustOpenPath(t, path)
	applied := mustCommit(t, first, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})

	tx, err := first.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `UPDATE turns SET text = 'changed'`)
	is.NoErr(err)

	// Opening a store whose schema is current takes no write lock.
	second := mustOpenPath(t, path, sqlitestore.WithBusyTimeout(20*time.Millisecond), sqlitestore.WithExisting())

	turn, err := second.LoadTurn(ctx, "acme", applied.Outbox[0].Turn)
	is.NoErr(err)                      // reads do not wait for the writer
	is.Equal(turn.Text, "book a seat") // and see the last commit

	_, err = second.ClaimDue(ctx, t0.Add(time.Hour), 10, "w2", lease)
	is.True(errors.Is(err, sqlitestore.ErrBusy)) // a claim waits for the busy timeout, then fails
	t.Log(err)
	_, err = second.Apply(ctx, begin("acme"))
	is.True(errors.Is(err, sqlitestore.ErrBusy)) // so does an Apply

	is.NoErr(tx.Rollback())
	claims, err := second.ClaimDue(ctx, t0.Add(time.Hour), 10, "w2", lease)
	is.NoErr(err)
	is.Equal(len(claims), 1) // the refused claim took nothing
}

// A cancelled context stays a context error.
func TestCancelledContext(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Apply(ctx, begin("acme"))
	is.True(errors.Is(err, context.Canceled))
	_, err = s.ClaimDue(ctx, t0, 1, "w", lease)
	is.True(errors.Is(err, context.Canceled))
	_, err = s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
	is.True(errors.Is(err, context.Canceled))
}

// A UNIQUE violation is ErrConflict: a Begin of a turn that exists.
func TestBeginExistingTurnIsConflict(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	w := begin("acme")
	_, err := s.Apply(ctx, w)
	is.NoErr(err)
	_, err = s.Apply(ctx, w)
	is.True(errors.Is(err, turnframe.ErrConflict))
	w.Account, w.Begin.Account = "globex", "globex"
	_, err = s.Apply(ctx, w)
	is.True(errors.Is(err, turnframe.ErrConflict)) // turn ids are unique across accounts
}

// TestApplyTxLeavesNothingOfAWriteThatDidNotReturnCleanly: ApplyTx's Write
// is undone, and the caller's own row kept, when its App panics (a caller
// that recovers the panic and commits), and when the caller's context ends
// after the Write's statements ran but before the savepoint's release (the
// release never reaches SQLite). Found by outside attacks (the second on
// pgstore first): in both the caller's commit used to commit the Write.
func TestApplyTxLeavesNothingOfAWriteThatDidNotReturnCleanly(t *testing.T) {
	tests := []struct {
		name string
		app  func(cancel context.CancelFunc) turnframe.AppWrites
	}{
		{"AppPanics", func(context.CancelFunc) turnframe.AppWrites {
			return func(context.Context, turnframe.Tx) error { panic("app bug") }
		}},
		{"ContextEndsBeforeTheRelease", func(cancel context.CancelFunc) turnframe.AppWrites {
			return func(context.Context, turnframe.Tx) error { cancel(); return nil }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			s, tx, commit := appTxWithItsOwnRow(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			commit.App = tt.app(cancel)
			var err error
			func() {
				defer func() { _ = recover() }()
				_, err = s.ApplyTx(ctx, tx, commit)
			}()
			is.True(err != nil || tt.name == "AppPanics") // reported as failed (or it panicked)
			is.NoErr(tx.Commit())                         // the caller commits its own row
			is.Equal(count(t, s, "bookings"), 1)          // the caller's row
			is.Equal(count(t, s, "outbox"), 0)            // and nothing of the Write
			is.Equal(count(t, s, "events"), 0)
		})
	}
}

// TestBeginTxHoldsTheWriteLockBeforeItsFirstWrite: BeginTx is BEGIN
// IMMEDIATE, so the file's write lock is the caller's from the start, not
// from its first write: another Store's write waits its busy timeout and
// fails with ErrBusy even while the transaction has written nothing yet.
// (TestSecondStoreWhileWriteTxHeld writes first, which takes the lock on a
// deferred BEGIN too.)
func TestBeginTxHoldsTheWriteLockBeforeItsFirstWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	first := mustOpenPath(t, path)
	tx, err := first.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback()
	second := mustOpenPath(t, path, sqlitestore.WithBusyTimeout(20*time.Millisecond), sqlitestore.WithExisting())
	_, err = second.Apply(ctx, begin("acme"))
	is.True(errors.Is(err, sqlitestore.ErrBusy)) // the lock is held from BeginTx on
	is.NoErr(tx.Rollback())
	_, err = second.Apply(ctx, begin("acme"))
	is.NoErr(err) // and free once the transaction ends
}
