package turnframe_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// An application's own transaction that enqueues through ApplyTx wakes a
// Run on the same sqlitestore.Store: the Run's claim waits for the commit
// on the one writer connection and then finds the rows.
func TestRunWakesWhenAnApplicationTransactionEnqueues(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "turnframe.db"))
	is.NoErr(err) // open
	t.Cleanup(func() { store.Close() })
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(dispNow), ids.AttemptID(dispNow)
	_, err = store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: dispNow,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(dispNow), Text: "pay"},
		Admit:  []turnframe.Command{{Key: "k1", Case: "case/k1", Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	is.NoErr(err) // a command running

	w := watch(store)
	gate := newSendGate()
	close(gate.proceed)
	d := turnframe.NewDispatcher(notifyingStore{w}, gate, runConfig(), turnframe.WithClock(func() time.Time { return dispNow }))
	stop := runDispatcher(t, d)
	is.Equal(await(t, w.claims, "the first claim"), 0)  // nothing due at start
	is.Equal(await(t, w.claims, "the second claim"), 0) // nor after the release: Run is idle

	tx, err := store.BeginTx(ctx)
	is.NoErr(err) // the application's transaction
	defer tx.Rollback()
	applied, err := store.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: dispNow,
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: dispMessages(1, "payments", ""),
	})
	is.NoErr(err)                                                         // the commit's write, in the application's transaction
	is.NoErr(tx.Commit())                                                 // committed by the application
	is.Equal(await(t, w.claims, "a claim after the commit"), 1)           // woken, and saw the committed row
	is.Equal(await(t, gate.started, "the send").ID, applied.Outbox[0].ID) // and sent it
	is.NoErr(stop())
}
