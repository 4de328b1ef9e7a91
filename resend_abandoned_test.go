package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// polAbandonOnResume is a RecoveryHandler that abandons the turn it is asked
// to resume, as an application (or the crash harness's fault (a)) giving
// the turn up right after the policy put one of its commands back to
// Pending, before anything ran it again.
type polAbandonOnResume struct {
	rt      *turnframe.Runtime
	resumed int
}

func (p *polAbandonOnResume) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

func (p *polAbandonOnResume) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	p.resumed++
	return p.rt.Abandon(ctx, m.Account, m.Turn, "user.left")
}

func (p *polAbandonOnResume) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// A command the policy put back to Pending (a lookup found the remote never
// received it) whose turn is abandoned before it runs again is Pending on
// an abandoned turn, as a command that never ran: recovery leaves it alone
// and the next turn that plans it adopts it and runs it, once. It is not
// stranded (the state the crash harness's audit met: a resend recorded
// just before its turn's abandonment).
func TestACommandResentJustBeforeItsTurnWasAbandonedIsAdoptedByTheNextPlan(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		first := polUnknownCommand(t, store, clock)
		clock.Add(time.Minute)
		opts := []turnframe.Option{turnframe.WithClock(clock.Now),
			turnframe.WithCommand("charge", turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened, "")})}
		rt := turnframe.New(store, opts...)
		handler := &polAbandonOnResume{rt: rt}
		report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, handler)
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)                                          // the unknown command
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent)               // found never received: put back to Pending
		is.Equal(handler.resumed, 1)                                             // its turn handed over to run it again
		is.Equal(rtPhase(t, store, first), turnframe.PhaseAbandoned)             // and given up instead
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalPending) // left Pending on the abandoned turn

		again, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(again.Policy), 0)                                           // nothing uncertain: the remote never had it
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalPending) // recovery leaves it, as any never-run command of an abandoned turn

		second, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "charge it after all")
		is.NoErr(err)
		planned, err := rt.Plan(ctx, rtAccount, second, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-charge", "card/1", "charge")}})
		is.NoErr(err)
		is.Equal(planned.Admissions[0].Kind, turnframe.AdoptedFromAbandoned) // adopted
		is.Equal(planned.Admissions[0].From, first)                          // from the abandoned turn
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
		})
		executed, err := rt.Execute(ctx, rtAccount, second, h)
		is.NoErr(err)
		is.Equal(rtKinds(executed), []turnframe.ResultKind{turnframe.ResultCommitted}) // it ran in the new turn
		is.Equal(h.callsOf("k-charge"), 1)                                             // once
		is.Equal(rtEntry(t, store, "k-charge").Turn, second)
	})
}
