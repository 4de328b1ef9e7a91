package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// SignalRecoveryDecided's doc: "recovery decided what a turn needs. Labels:
// Action." A turn cut before Deliver, one command committed and one whose
// outcome the policy escalated, is now answered around it
// (ActionRegenerateResponse: the report counts it, the handler is called),
// but the signal only ever says reconcile_external: the decision recovery
// acted on is never reported, so a dashboard built on the signal (otel's
// turnframe.recovery.decided) disagrees with RecoverReport.Turns.Actions.
func TestTheAnswerAroundAnUnknownIsSignalledAsDecided(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstoreFor(t)
	var mu sync.Mutex
	decided := map[string]int{}
	obs := turnframe.WithObserver(turnframe.ObserverFunc(func(s turnframe.Signal, l turnframe.Labels, _ time.Duration) {
		if s == turnframe.SignalRecoveryDecided {
			mu.Lock()
			decided[l.Action]++
			mu.Unlock()
		}
	}))
	opts := []turnframe.Option{turnframe.WithCommand("charge", turnframe.Remote{})} // escalates
	rt := turnframe.New(store, opts...)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("b1", "order-1", "book"), rtCmd("c1", "order-1", "charge"))
	_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
	is.NoErr(err)
	// The process dies here, before Deliver.
	h := &answerLog{}
	rep, err := turnframe.NewRecovery(store, append(opts, obs)...).Recover(ctx, turnframe.RecoveryScope{}, h)
	is.NoErr(err)
	is.Equal(len(h.answered), 1)                                       // the handler was asked to answer it
	is.Equal(rep.Turns.Actions[turnframe.ActionRegenerateResponse], 1) // and the report says so
	t.Logf("recovery_decided signals: %v", decided)
	is.Equal(decided[turnframe.ActionRegenerateResponse.String()], 1) // the signal names the decision acted on
}

// actionLog keeps the RegenerateResponse actions Recover hands it.
type actionLog struct {
	answerLog
	actions []turnframe.RecoveryAction
}

func (h *actionLog) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	h.actions = append(h.actions, a)
	return h.answerLog.RegenerateResponse(ctx, m, a)
}

// ActionRegenerateResponse's doc: "every command settled; the answer is
// missing. Rebuild it from the committed events and the answer tasks". Since
// recovery answers around unknowns the policy left, it hands that action
// for a turn one of whose commands is outcome unknown (escalated) — and the
// action names no entry, so a handler that trusts the doc (the CLI demo's
// answers "Nothing changed on your booking." from no committed events)
// tells the user nothing happened about an effect that may have happened.
func TestARegeneratedAnswerAroundAnUnknownSaysWhichOutcomeIsUnknown(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstoreFor(t)
	opts := []turnframe.Option{turnframe.WithCommand("charge", turnframe.Remote{})} // escalates
	rt := turnframe.New(store, opts...)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("c1", "order-1", "charge"))
	_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
	is.NoErr(err)
	is.Equal(rtEntry(t, store, "c1").Status, turnframe.JournalOutcomeUnknown)
	// The process dies here, before Deliver.
	h := &actionLog{}
	_, err = turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, h)
	is.NoErr(err)
	is.Equal(len(h.actions), 1) // recovery asks for the answer
	a := h.actions[0]
	t.Logf("action: kind %v, %d events, %d entries; c1 is %v", a.Kind, len(a.Events), len(a.Entries), rtEntry(t, store, "c1").Status)
	settled := rtEntry(t, store, "c1").Status.IsSettled()
	is.True(settled || len(a.Entries) > 0) // either every command settled, as the doc says, or the action names what is not
}
