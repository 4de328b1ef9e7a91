package turnframe_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// rtPlanAfterReplayRead is a store that lets plan run right after the
// first read of a replay record: the worst moment for Deliver and Abandon,
// which read the record, change one field and write it whole.
type rtPlanAfterReplayRead struct {
	turnframe.Store
	once sync.Once
	plan func()
}

func (s *rtPlanAfterReplayRead) Replay(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.ReplayRecord, error) {
	r, err := s.Store.Replay(ctx, account, turn)
	s.once.Do(s.plan)
	return r, err
}

// A Plan landing between Deliver's (or Abandon's) read of the replay
// record and its write is kept: the write expects the phase the record was
// read in, is refused, and the record is read again. Before, the Plan's
// understanding and loaded cases were overwritten with the empty record
// read before it.
func TestAPlanLandingDuringDeliverOrAbandonIsKept(t *testing.T) {
	understanding := &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{
		{Unit: 1, Words: turnframe.WordRange{First: 0, Last: 2, Start: 0, End: 14}, Basis: turnframe.BasisCurrentCommittedState},
	}}
	cases := []struct {
		name    string
		cmds    []turnframe.Command
		finish  func(rt *turnframe.Runtime, turn turnframe.TurnID) error
		want    turnframe.TurnPhase
		wantErr error
	}{
		{"deliver", nil, func(rt *turnframe.Runtime, turn turnframe.TurnID) error {
			return rt.Deliver(context.Background(), rtAccount, turn, "here it is")
		}, turnframe.PhaseDelivered, nil},
		{"deliver after a plan with a command", []turnframe.Command{rtCmd("k-race", "flight/9", "book")}, func(rt *turnframe.Runtime, turn turnframe.TurnID) error {
			return rt.Deliver(context.Background(), rtAccount, turn, "here it is")
		}, turnframe.PhasePlanned, turnframe.ErrConflict},
		{"abandon", []turnframe.Command{rtCmd("k-race", "flight/9", "book")}, func(rt *turnframe.Runtime, turn turnframe.TurnID) error {
			return rt.Abandon(context.Background(), rtAccount, turn, "user-left")
		}, turnframe.PhaseAbandoned, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				plain := turnframe.New(store)
				turn, err := plain.Receive(ctx, rtAccount, plain.NewConversationID(), "what is booked")
				is.NoErr(err) // receive
				var planErr error
				racing := &rtPlanAfterReplayRead{Store: store, plan: func() {
					_, planErr = plain.Plan(ctx, rtAccount, turn, turnframe.Plan{
						Understanding: understanding, LoadedCases: []turnframe.CaseKey{"flight/9"}, Commands: tc.cmds,
					})
				}}
				err = tc.finish(turnframe.New(racing), turn)
				is.NoErr(planErr)                   // the plan landed first
				is.True(errors.Is(err, tc.wantErr)) // delivered or abandoned, unless a command is pending
				rec, err := store.Replay(ctx, rtAccount, turn)
				is.NoErr(err)                                              // replay
				is.Equal(rec.Understanding, understanding)                 // the plan's understanding is kept
				is.Equal(rec.LoadedCases, []turnframe.CaseKey{"flight/9"}) // and its cases
				marker, err := store.TurnPhase(ctx, rtAccount, turn)
				is.NoErr(err)                   // phase
				is.Equal(marker.Phase, tc.want) // where the turn ended
				if tc.want == turnframe.PhaseAbandoned {
					is.Equal(rec.AbandonCode, "user-left") // the abandon's own field
				}
				if tc.want == turnframe.PhaseDelivered {
					is.Equal(rec.Response, "here it is") // the answer's own field
				}
			})
		})
	}
}
