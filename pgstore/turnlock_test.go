package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// Store.Apply: "ErrConflict for a refused transition"; DESIGN.md: a
// terminal phase is never left (TurnPhaseRefusesGoingBackAndLeaving
// ATerminalPhase). lockTurnSQL: "reads the turn a Write changes and locks
// it: the Writes of one turn run one at a time." Here another transaction
// (a caller's ApplyTx, still open) abandons the turn when a Write that
// delivers it comes: the Write must wait for it and judge the turn as that
// transaction left it (Abandoned: ErrConflict), never write over its move.
func TestAPhaseMoveWaitsForAnOpenMoveOfItsTurn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	now := base
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(now)
	_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"},
		Phase: turnframe.PhasePlanned})
	is.NoErr(err) // a planned turn with no entry

	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback(context.Background())
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now, Phase: turnframe.PhaseAbandoned})
	is.NoErr(err) // abandoned, not yet committed

	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now, Phase: turnframe.PhaseDelivered})
		done <- err
	}()
	got := waitForWaiterOrDone(t, tx.Conn(), done)
	is.NoErr(tx.Commit(ctx))
	if got == nil {
		got = done
	}
	err = <-got
	is.True(errors.Is(err, turnframe.ErrConflict)) // judged on the abandoned turn
	marker, err := s.TurnPhase(ctx, "acme", turn)
	is.NoErr(err)
	is.Equal(marker.Phase, turnframe.PhaseAbandoned) // and the abandonment stands
}
