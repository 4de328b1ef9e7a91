package turnframe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
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

// A file an earlier release wrote can hold a replay record that breaks a
// rule a Write keeps now — more loaded cases than MaxPlanCases (before the
// plan ceilings), a case key with a NUL byte (before keys refused NUL), a
// question whose answer basis is out of range (before Validate checked it;
// the store must first be able to read such a record back) —
// and the file keeps it. Deliver and Abandon read the record and write it
// back whole, and Write.Validate refused that: the turn could be neither
// delivered nor abandoned, by anyone. The record is now fitted to the
// rules as the turn ends. The old row is made by writing the JSON the old
// release wrote straight into the file.
func TestAnOldTurnsReplayRecordThatBreaksTodaysRulesDoesNotWedgeItsTurn(t *testing.T) {
	var many []string
	for i := range turnframe.MaxPlanCases + 1 {
		many = append(many, fmt.Sprintf("booking/%d", i))
	}
	manyJSON, _ := json.Marshal(map[string][]string{"LoadedCases": many})
	cases := []struct {
		name      string
		old       string              // the record as the earlier release stored it
		want      []turnframe.CaseKey // its loaded cases once the turn ended
		questions int                 // and how many questions it keeps
	}{
		{"over the plan ceilings", string(manyJSON), nil, 0},
		{"a case key with a NUL byte", `{"LoadedCases":["flight\u00001","flight/2"]}`, []turnframe.CaseKey{"flight/2"}, 0},
		{"a question whose answer basis is out of range", `{"Understanding":{"Questions":[` +
			`{"Unit":1,"Words":{"First":0,"Last":1,"Start":0,"End":4},"Basis":"answer basis(3)","ContinuesPrevious":false},` +
			`{"Unit":2,"Words":{"First":2,"Last":3,"Start":5,"End":9},"Basis":"general_domain_knowledge","ContinuesPrevious":false}]},` +
			`"LoadedCases":["flight/2"]}`, []turnframe.CaseKey{"flight/2"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "old.db"))
			is.NoErr(err)
			t.Cleanup(func() { store.Close() })
			rt := turnframe.New(store)
			old := func() turnframe.TurnID {
				turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "what do I have booked?")
				is.NoErr(err)
				_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{LoadedCases: []turnframe.CaseKey{"booking/1"}})
				is.NoErr(err)
				tx, err := store.BeginTx(ctx)
				is.NoErr(err)
				_, err = tx.ExecContext(ctx, `UPDATE turns SET replay = ? WHERE id = ?`, tc.old, turn.String())
				is.NoErr(err)
				is.NoErr(tx.Commit())
				got, err := store.Replay(ctx, rtAccount, turn)
				is.NoErr(err)
				is.True(got.Validate() != nil) // the file keeps the old record and reads it back
				return turn
			}
			delivered, abandoned := old(), old()
			is.NoErr(rt.Deliver(ctx, rtAccount, delivered, "here they are")) // an old turn can still be answered
			is.NoErr(rt.Abandon(ctx, rtAccount, abandoned, "gave_up"))       // or given up
			for _, turn := range []turnframe.TurnID{delivered, abandoned} {
				got, err := store.Replay(ctx, rtAccount, turn)
				is.NoErr(err) // replay
				if tc.want == nil {
					is.Equal(len(got.LoadedCases), turnframe.MaxPlanCases)       // cut to the ceiling
					is.Equal(got.LoadedCases[0], turnframe.CaseKey("booking/0")) // the first kept
				} else {
					is.Equal(got.LoadedCases, tc.want) // what no rule keeps is dropped, the rest kept
				}
				if got.Understanding != nil {
					is.Equal(len(got.Understanding.Questions), tc.questions) // a question with no answer basis dropped
				}
				is.NoErr(got.Validate()) // what is stored now keeps every rule
			}
		})
	}
}
