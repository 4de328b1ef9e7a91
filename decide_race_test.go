package turnframe_test

import (
	"context"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// rtPlanBeforeRead is a Store that lets plan run once, just before the
// first ForTurn or TurnPhase read of turn that onRead names: the app's Plan
// landing between two reads of Decide.
type rtPlanBeforeRead struct {
	turnframe.Store
	turn   turnframe.TurnID
	onRead string // "ForTurn" or "TurnPhase"
	once   sync.Once
	plan   func()
}

func (s *rtPlanBeforeRead) ForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	if turn == s.turn && s.onRead == "ForTurn" {
		s.once.Do(s.plan)
	}
	return s.Store.ForTurn(ctx, account, turn)
}

func (s *rtPlanBeforeRead) TurnPhase(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	if turn == s.turn && s.onRead == "TurnPhase" {
		s.once.Do(s.plan)
	}
	return s.Store.TurnPhase(ctx, account, turn)
}

// A turn whose plan admitted nothing of its own (its one command is another
// turn's: a repeated message) is planned, and recovery answers it; it never
// interprets it again, also when the app's Plan lands between Decide's read
// of the turn's entries and its read of the phase. Decide read the phase
// first: a Plan landing before the entries were read left a planned turn
// looking unplanned, and it was restarted.
func TestDecideNeverRestartsATurnPlannedDuringItsReads(t *testing.T) {
	for _, onRead := range []string{"ForTurn", "TurnPhase"} {
		t.Run(onRead, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store)
				conv := rt.NewConversationID()
				first, err := rt.Receive(ctx, rtAccount, conv, "book seat 1")
				is.NoErr(err)
				_, err = rt.Plan(ctx, rtAccount, first, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-seat", "seat/1", "book")}})
				is.NoErr(err)
				again, err := rt.Receive(ctx, rtAccount, conv, "book seat 1")
				is.NoErr(err)

				var planErr error
				wrapped := &rtPlanBeforeRead{Store: store, turn: again, onRead: onRead, plan: func() {
					_, planErr = rt.Plan(ctx, rtAccount, again, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-seat", "seat/1", "book")}})
				}}
				action, err := turnframe.NewRecovery(wrapped).Decide(ctx, rtAccount, again)
				is.NoErr(err)
				is.NoErr(planErr)                                             // the app's plan landed during Decide
				is.True(action.Kind != turnframe.ActionRestartInterpretation) // a planned turn is never interpreted again
			})
		})
	}
}
