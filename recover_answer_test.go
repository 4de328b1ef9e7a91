package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// answerLog records the decisions Recover hands it.
type answerLog struct {
	mu        sync.Mutex
	restarted []turnframe.TurnID
	resumed   []turnframe.TurnID
	answered  []turnframe.TurnID
	around    []turnframe.IdempotencyKey // the unknowns an answer was given around
}

func (h *answerLog) RestartInterpretation(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarted = append(h.restarted, m.Turn)
	return nil
}

func (h *answerLog) ResumeCommands(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resumed = append(h.resumed, m.Turn)
	return nil
}

func (h *answerLog) RegenerateResponse(_ context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered = append(h.answered, m.Turn)
	for _, e := range a.Entries {
		h.around = append(h.around, e.Key)
	}
	return nil
}

// Deliver's doc: "A crash before the write leaves the turn as it was,
// which recovery sees as a turn to answer again", and "An entry that is
// outcome unknown does not hold delivery back: the answer may say the
// effect is being verified". A turn whose Execute ran to its end — one
// command committed, one outcome unknown — and whose process died before
// Deliver is never answered by recovery while the unknown waits for a
// person (escalated by the policy, or undeclared and left for Settle):
// Decide's rule 1 hands it to the policy on every pass, the handler is
// never called, and the user never gets an answer.
func TestRecoveryAnswersATurnCutBeforeDeliverWhoseUnknownWaitsForAPerson(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []turnframe.Option
	}{
		{"EscalatedByItsPolicy", []turnframe.Option{turnframe.WithCommand("charge", turnframe.Remote{})}},
		{"UndeclaredLeftForSettle", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			store := memstoreFor(t)
			rt := turnframe.New(store, tc.opts...)
			turn := rtPlanned(t, rt, rtAccount, rtCmd("b1", "order-1", "book"), rtCmd("c1", "order-1", "charge"))
			rep, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			is.Equal(rep.Phase, turnframe.PhaseCommitted) // every command ran: one committed, one unknown
			// The process dies here, before Deliver.
			rec := turnframe.NewRecovery(store, tc.opts...)
			h := &answerLog{}
			for range 3 { // passes of a recovery loop
				_, err := rec.Recover(ctx, turnframe.RecoveryScope{}, h)
				is.NoErr(err)
			}
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted) // nobody answered it
			is.True(len(h.answered) > 0)                                // recovery answers the turn again
			is.Equal(h.around[0], turnframe.IdempotencyKey("c1"))       // around the charge, which it names
		})
	}
}

// A turn whose unknown outcome came before a command still pending is not
// answered around it, nor resumed: the command after an unknown may
// depend on it (DESIGN.md section 9, rule 1), and the turn waits for the
// unknown to be resolved.
func TestRecoveryLeavesATurnWithAPendingCommandBehindAnUnknownToWait(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstoreFor(t)
	clock := newPolClock(dispNow)
	opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommand("charge", turnframe.Remote{})} // escalates
	rt := turnframe.New(store, opts...)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("c1", "order-1", "charge"), rtCmd("b1", "order-1", "book"))
	cut, die := context.WithCancel(ctx) // the process dies while the charge runs
	_, _ = rt.Execute(cut, rtAccount, turn, rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
		die()
		return rtScript(ctx, call, n)
	}))
	is.Equal(rtEntry(t, store, "c1").Status, turnframe.JournalExecuting) // its attempt died
	is.Equal(rtEntry(t, store, "b1").Status, turnframe.JournalPending)   // never ran
	clock.Add(24 * time.Hour)                                            // the attempt's lease ended
	h := &answerLog{}
	for range 3 { // passes of a recovery loop
		_, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, h)
		is.NoErr(err)
	}
	is.Equal(rtEntry(t, store, "c1").Status, turnframe.JournalNeedsIntervention) // declared unknown, escalated
	is.Equal(len(h.answered), 0)                                                 // not answered around it
	is.Equal(len(h.resumed), 0)                                                  // nor resumed
}
