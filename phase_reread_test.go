package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// phBusyReread lands another flow's Plan of the turn (plan, through the
// store underneath) just before the first Write that expects a phase, as a
// second process's plan lands between a call's read and its write; every
// read of the turn's phase after that fails, as a read on a busy store
// does.
type phBusyReread struct {
	turnframe.Store
	t      *testing.T
	plan   turnframe.Plan
	landed bool
}

func (s *phBusyReread) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if !s.landed && w.ExpectPhase != turnframe.PhaseUnset {
		s.landed = true
		if _, err := turnframe.New(s.Store).Plan(ctx, w.Account, w.Turn, s.plan); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.Store.Apply(ctx, w)
}

func (s *phBusyReread) TurnPhase(ctx context.Context, a turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	if s.landed {
		return turnframe.TurnPhaseMarker{}, fmt.Errorf("read turn: %w", turnframe.ErrBusy)
	}
	return s.Store.TurnPhase(ctx, a, turn)
}

// A Plan, a Deliver or an Abandon whose Write the store refuses because
// another flow's Plan moved the turn since it was read reads the phase
// again to write under the new one. When that read fails, nothing is known
// of the turn but that the read failed: ErrConflict would tell the caller
// its plan is another reading of the message (and an app gives the turn
// up), or that the turn holds pending commands or ended, and the caller
// would not try again — when the same call, tried again, lands. It
// reports the failed read (ErrBusy: try again), and the call tried again
// does what it would have done.
func TestAWriteRefusedForAMovedPhaseWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	book := rtCmd("k-seat", "flight/7", "book")
	cases := []struct {
		name  string
		other turnframe.Plan // the plan that lands first
		call  func(ctx context.Context, rt *turnframe.Runtime, turn turnframe.TurnID) error
		want  turnframe.TurnPhase // after the call, tried again
	}{
		{"a repeat of the plan that landed", turnframe.Plan{Commands: []turnframe.Command{book}},
			func(ctx context.Context, rt *turnframe.Runtime, turn turnframe.TurnID) error {
				_, err := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{book}})
				return err
			}, turnframe.PhasePlanned},
		{"a delivery", turnframe.Plan{},
			func(ctx context.Context, rt *turnframe.Runtime, turn turnframe.TurnID) error {
				return rt.Deliver(ctx, rtAccount, turn, "nothing to do")
			}, turnframe.PhaseDelivered},
		{"an abandonment", turnframe.Plan{Commands: []turnframe.Command{book}},
			func(ctx context.Context, rt *turnframe.Runtime, turn turnframe.TurnID) error {
				return rt.Abandon(ctx, rtAccount, turn, "user.left")
			}, turnframe.PhaseAbandoned},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store)
				turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "a window seat")
				is.NoErr(err) // receive
				busy := turnframe.New(&phBusyReread{Store: store, t: t, plan: c.other})
				err = c.call(ctx, busy, turn)
				is.True(err != nil)                                       // the read failed
				is.True(!errors.Is(err, turnframe.ErrConflict))           // nothing refused the call itself
				is.True(errors.Is(err, turnframe.ErrBusy))                // the failure that stopped it, to try again
				is.Equal(rtPhase(t, store, turn), turnframe.PhasePlanned) // the other flow's plan, nothing of the call

				is.NoErr(c.call(ctx, rt, turn))           // tried again, it lands
				is.Equal(rtPhase(t, store, turn), c.want) // and does what it would have done
				entries, err := store.ForTurn(ctx, rtAccount, turn)
				is.NoErr(err)
				is.Equal(len(entries), len(c.other.Commands)) // the plan that landed, admitted once
			})
		})
	}
}
