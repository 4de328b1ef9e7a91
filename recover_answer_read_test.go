package turnframe_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// readHook is a Store that runs act once, just before the n-th ForTurn
// read of turn: a change landing between two of recovery's reads.
type readHook struct {
	turnframe.Store
	turn turnframe.TurnID
	n    int
	act  func()
	mu   sync.Mutex
	seen int
}

func (s *readHook) ForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	if turn == s.turn {
		s.mu.Lock()
		s.seen++
		fire := s.seen == s.n
		s.mu.Unlock()
		if fire {
			s.act()
		}
	}
	return s.Store.ForTurn(ctx, account, turn)
}

// answerCheck is a RecoveryHandler whose RegenerateResponse compares the
// action with the turn as the store holds it at that moment: the unknowns
// it names (RecoveryAction.Entries), the entries it says await approval,
// and the phase (a turn answered already is not answered again).
type answerCheck struct {
	answerLog
	t       *testing.T
	store   turnframe.Store
	account turnframe.AccountID
}

func (h *answerCheck) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	is := is.New(h.t)
	entries, err := h.store.ForTurn(ctx, h.account, m.Turn)
	is.NoErr(err)
	var unknown, awaiting []turnframe.IdempotencyKey
	for _, e := range entries {
		switch {
		case e.Status.IsUncertain():
			unknown = append(unknown, e.Key)
		case e.Status.IsAwaitingApproval():
			awaiting = append(awaiting, e.Key)
		}
	}
	keys := func(es []turnframe.JournalEntry) []turnframe.IdempotencyKey {
		var out []turnframe.IdempotencyKey
		for _, e := range es {
			out = append(out, e.Key)
		}
		return out
	}
	h.t.Logf("answer around %v, awaiting %v; the store: unknown %v, awaiting %v", keys(a.Entries), keys(a.Awaiting), unknown, awaiting)
	is.True(slices.Equal(keys(a.Entries), unknown))      // the unknowns named are the turn's
	is.True(slices.Equal(keys(a.Awaiting), awaiting))    // and so are the entries said to wait for approval
	is.True(!rtPhase(h.t, h.store, m.Turn).IsTerminal()) // a turn answered already is not answered again
	return h.answerLog.RegenerateResponse(ctx, m, a)
}

// Recover answers a turn cut before Deliver around the unknowns its policy
// left (DESIGN.md §9). Once answered from one read of the turn and naming
// the unknowns of an earlier one, the answer could tell the user that a
// charge approved and run since still waited for approval, or that one a
// person had settled was being checked; or answer a turn the app had just
// delivered. Whatever read of the turn a change lands before, the answer
// names the turn as it is.
func TestAnAnswerAroundUnknownsNamesTheTurnAsItIs(t *testing.T) {
	scenarios := []struct {
		name    string
		answers int // answers recovery gives, -1 for any: a turn the app delivered is answered once, by whoever comes first
		setup   func(t *testing.T, rt *turnframe.Runtime) turnframe.TurnID
		act     func(t *testing.T, rt *turnframe.Runtime, store turnframe.Store, turn turnframe.TurnID)
	}{
		{"an awaiting charge approved and run, its outcome unknown", 1, func(t *testing.T, rt *turnframe.Runtime) turnframe.TurnID {
			c2 := rtCmd("c2", "order-2", "charge")
			c2.NeedsApproval = true
			return rtPlanned(t, rt, rtAccount, rtCmd("c1", "order-1", "charge"), c2)
		}, func(t *testing.T, rt *turnframe.Runtime, _ turnframe.Store, turn turnframe.TurnID) {
			is := is.New(t)
			_, err := rt.Approve(context.Background(), rtAccount, "c2", turnframe.ActorApp, "ok")
			is.NoErr(err)
			_, err = rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
		}},
		{"the unknown settled by a person", 1, func(t *testing.T, rt *turnframe.Runtime) turnframe.TurnID {
			return rtPlanned(t, rt, rtAccount, rtCmd("b1", "order-1", "book"), rtCmd("c1", "order-1", "charge"))
		}, func(t *testing.T, _ *turnframe.Runtime, store turnframe.Store, _ turnframe.TurnID) {
			is.New(t).NoErr(turnframe.NewRecovery(store).Settle(context.Background(), turnframe.JournalSubject(rtAccount, "c1"),
				turnframe.Decision{Verdict: turnframe.VerdictCompleted, Code: "operator.completed", Actor: turnframe.ActorOperator}))
		}},
		{"the turn delivered by the app", -1, func(t *testing.T, rt *turnframe.Runtime) turnframe.TurnID {
			return rtPlanned(t, rt, rtAccount, rtCmd("b1", "order-1", "book"), rtCmd("c1", "order-1", "charge"))
		}, func(t *testing.T, rt *turnframe.Runtime, _ turnframe.Store, turn turnframe.TurnID) {
			is.New(t).NoErr(rt.Deliver(context.Background(), rtAccount, turn, "booked; the charge is being checked"))
		}},
	}
	for _, sc := range scenarios {
		for _, n := range []int{2, 3} { // the read after the first decision, and the one after that
			t.Run(sc.name+"/before read "+string(rune('0'+n)), func(t *testing.T) {
				is := is.New(t)
				ctx := context.Background()
				inner := memstoreFor(t)
				rt := turnframe.New(inner)
				turn := sc.setup(t, rt)
				_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript)) // c1's outcome is unknown
				is.NoErr(err)
				// The process dies before Deliver; recovery runs, and the
				// change lands just before its n-th read of the turn.
				store := &readHook{Store: inner, turn: turn, n: n, act: func() { sc.act(t, rt, inner, turn) }}
				h := &answerCheck{t: t, store: inner, account: rtAccount}
				_, err = turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, h)
				is.NoErr(err)
				if sc.answers >= 0 {
					is.Equal(len(h.answered), sc.answers) // the turn is answered, around what is unknown
				}
			})
		}
	}
}
