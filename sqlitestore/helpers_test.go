package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// t0 is the tests' clock: a fixed instant, on the microsecond.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lease is how long the tests' claims and attempts hold their rows.
const lease = time.Minute

var ids = turnframe.NewIDGenerator()

// mustOpen opens a store on a new file in a temporary directory and closes
// it when the test ends.
func mustOpen(tb testing.TB, opts ...sqlitestore.Option) *sqlitestore.Store {
	tb.Helper()
	return mustOpenPath(tb, filepath.Join(tb.TempDir(), "turnframe.db"), opts...)
}

func mustOpenPath(tb testing.TB, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	tb.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts...)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// begin returns the Write that creates a new turn of account.
func begin(account turnframe.AccountID) turnframe.Write {
	turn := ids.TurnID(t0)
	return turnframe.Write{
		Account: account, Turn: turn, Now: t0,
		Begin: &turnframe.StoredTurn{Account: account, ID: turn, Conversation: ids.ConversationID(t0), Text: "book a seat"},
	}
}

// commitWrites returns the three Writes that begin a turn, admit one
// command and start it, and the Write that commits it with one event on
// case "booking/1" and the given outbox messages.
func commitWrites(account turnframe.AccountID, key turnframe.IdempotencyKey, msgs ...turnframe.OutboxMessage) (prepare turnframe.Write, commit turnframe.Write) {
	prepare = begin(account)
	cmd := turnframe.Command{Key: key, Case: "booking/1", Name: "book", Payload: []byte(`{"seat":"1A"}`)}
	attempt := ids.AttemptID(t0)
	prepare.Admit = []turnframe.Command{cmd}
	prepare.Settle = []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: lease}}
	prepare.Phase = turnframe.PhaseExecuting
	commit = turnframe.Write{
		Account: account, Turn: prepare.Turn, Now: t0.Add(time.Second),
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Events: []turnframe.Event{{Case: "booking/1", Type: "booking.confirmed", Data: []byte(`{}`)}},
		Outbox: msgs,
		Phase:  turnframe.PhaseCommitted,
	}
	return prepare, commit
}

// mustCommit applies commitWrites and returns what the commit applied.
func mustCommit(tb testing.TB, s turnframe.Store, account turnframe.AccountID, key turnframe.IdempotencyKey, msgs ...turnframe.OutboxMessage) turnframe.Applied {
	tb.Helper()
	ctx := context.Background()
	prepare, commit := commitWrites(account, key, msgs...)
	if _, err := s.Apply(ctx, prepare); err != nil {
		tb.Fatalf("prepare: %v", err)
	}
	applied, err := s.Apply(ctx, commit)
	if err != nil {
		tb.Fatalf("commit: %v", err)
	}
	return applied
}
