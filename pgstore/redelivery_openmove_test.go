package pgstore_test

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// DESIGN.md §14: the INSERT arbitrates a message id delivered twice; it
// waits for a transaction that wrote the winner's row and is still open,
// and the winner is then read, not locked, as that transaction left it.
// Here the turn a message began is being abandoned by a transaction still
// open (a caller's ApplyTx, as a recovery pass's) when the message comes
// again: the redelivery waits for it and reports the turn abandoned, never
// the phase the abandonment was replacing. A store that looked the id up
// before its INSERT would read that stale phase.
func TestARedeliveryReportsItsTurnAsAnOpenMoveLeftIt(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	now := base
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	conv := ids.ConversationID(now)
	deliver := func() turnframe.Write {
		turn := ids.TurnID(now)
		return turnframe.Write{Account: "acme", Turn: turn, Now: now,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: conv, Text: "hi", MessageID: "upd-1"}}
	}
	first := deliver()
	_, err := s.Apply(ctx, first)
	is.NoErr(err) // the first delivery

	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback(context.Background())
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: first.Turn, Now: now, Phase: turnframe.PhaseAbandoned})
	is.NoErr(err) // abandoned, not yet committed

	var again turnframe.Applied
	done := make(chan error, 1)
	go func() {
		var err error
		again, err = s.Apply(ctx, deliver())
		done <- err
	}()
	got := waitForWaiterOrDone(t, tx.Conn(), done)
	is.NoErr(tx.Commit(ctx))
	if got == nil {
		got = done
	}
	is.NoErr(<-got)                                             // a redelivery
	is.True(again.Redelivered != nil)                           // reported as one
	is.Equal(again.Redelivered.ID, first.Turn)                  // of the first turn
	is.Equal(again.Redelivered.Phase, turnframe.PhaseAbandoned) // as the open move left it
}
