package memstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return appStore{s}
	})
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestDuplicateRowKey holds memstore to the rule no write of the suite can
// reach: the keys turnframe.OutboxKey derives are distinct, so only a row
// put in from outside (as an older key scheme left it) can share one.
func TestDuplicateRowKey(t *testing.T) {
	tests := []struct {
		name  string
		held  turnframe.OutboxEntry // the row the store already holds, completed
		prune bool                  // whether it is pruned before the command commits
		rows  int                   // how many rows the command enqueues
		want  error
	}{
		{"ARowKeyTheAccountHoldsIsConflictAndWritesNothing", turnframe.OutboxEntry{Account: "acme", Key: "k"}, false, 1, turnframe.ErrConflict},
		{"ALaterRowsKeyTheAccountHoldsIsConflictAndWritesNothing", turnframe.OutboxEntry{Account: "acme", Key: "k~2"}, false, 2, turnframe.ErrConflict},
		{"TheSameRowKeyInAnotherAccountIsAccepted", turnframe.OutboxEntry{Account: "globex", Key: "k"}, false, 1, nil},
		{"AnotherRowKeyOfTheAccountIsAccepted", turnframe.OutboxEntry{Account: "acme", Key: "k/1"}, false, 2, nil},
		{"AKeyWhoseRowWasPrunedIsAccepted", turnframe.OutboxEntry{Account: "acme", Key: "k"}, true, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			ids := turnframe.NewIDGenerator()
			s := memstore.New()
			t.Cleanup(func() { s.Close() })
			held := turnframe.OutboxRecord{OutboxEntry: tc.held, Status: turnframe.OutboxCompleted, DueAt: base, UpdatedAt: base, FinishedAt: base}
			held.ID, held.Turn, held.Destination, held.CreatedAt = ids.OutboxID(base), ids.TurnID(base), "payments", base
			memstore.PutOutbox(s, held)
			if tc.prune {
				n, err := s.Prune(ctx, base.Add(time.Second))
				is.NoErr(err)  // prune
				is.Equal(n, 1) // the held row is gone
			}

			turn, attempt := ids.TurnID(base), ids.AttemptID(base)
			_, err := s.Apply(ctx, turnframe.Write{
				Account: "acme", Turn: turn, Now: base,
				Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base)},
				Admit:  []turnframe.Command{{Key: "k", Case: "payment/1", Name: "charge"}},
				Settle: []turnframe.Settlement{{Key: "k", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
			})
			is.NoErr(err) // the command runs
			msgs := make([]turnframe.OutboxMessage, tc.rows)
			for i := range msgs {
				msgs[i] = turnframe.OutboxMessage{Destination: "payments"}
			}
			before, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			is.NoErr(err) // list before
			_, err = s.Apply(ctx, turnframe.Write{
				Account: "acme", Turn: turn, Now: base.Add(time.Second),
				Settle: []turnframe.Settlement{{Key: "k", To: turnframe.JournalCommitted, Attempt: attempt}},
				Events: []turnframe.Event{{Case: "payment/1", Type: "charged"}},
				Outbox: msgs,
			})
			entry, gerr := s.ByKey(ctx, "acme", "k")
			is.NoErr(gerr) // by key
			rev, rerr := s.CaseRevision(ctx, "acme", "payment/1")
			is.NoErr(rerr) // revision
			after, lerr := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			is.NoErr(lerr) // list after
			if tc.want != nil {
				is.True(errors.Is(err, tc.want))                   // refused
				is.Equal(entry.Status, turnframe.JournalExecuting) // the settlement did not land
				is.Equal(rev, turnframe.CaseRevision(0))           // nor the event
				is.True(reflect.DeepEqual(after, before))          // nor any row
				return
			}
			is.NoErr(err)                                      // accepted
			is.Equal(entry.Status, turnframe.JournalCommitted) // committed
			is.Equal(len(after), len(before)+tc.rows)          // with its rows
		})
	}
}
