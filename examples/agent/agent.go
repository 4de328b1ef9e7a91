package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/turnframe/turnframe"
)

// account is the example's one tenant.
const account turnframe.AccountID = "ana"

// errDied is how a process's turn ends when the story kills it.
var errDied = errors.New("the process died")

// agent is the application: the model, its tools, and the transcript.
type agent struct {
	w       io.Writer // the transcript
	path    string    // the SQLite file
	clock   *clock
	remotes *remotes
	sender  turnframe.Sender
	mux     *turnframe.Mux
	model   scriptedModel
	late    chan struct{} // a token per late answer turnframe recorded
}

// newAgent returns the application as a process starts it: what it is
// given is the SQLite file's path, the clock, the remotes and the sender
// to them, and where the transcript goes; nothing else survives a
// process.
func newAgent(w io.Writer, path string, c *clock, r *remotes, sender turnframe.Sender) *agent {
	return &agent{w: w, path: path, clock: c, remotes: r, sender: sender,
		mux: tools(r), late: make(chan struct{}, 1)}
}

// restarted is the application as a new process starts it over a's file,
// clock and remotes, writing to a's transcript: nothing a held in memory
// is carried over.
func (a *agent) restarted() *agent { return newAgent(a.w, a.path, a.clock, a.remotes, a.sender) }

func (a *agent) say(format string, args ...any) { fmt.Fprintf(a.w, format+"\n", args...) }

// respond plays one user message in p: Receive, the model's tool calls as
// commands (Plan, Execute), their results from the journal, and the
// model's answer (Deliver). If die, the process dies after the commands
// ran and before the answer went out: respond returns errDied.
func (a *agent) respond(ctx context.Context, p *process, msg message, die bool) error {
	a.clock.Advance(2 * time.Second)
	got, err := a.receive(ctx, p, msg)
	if err != nil {
		return err
	}
	a.say("user [%s, %s]: %s", msg.ID, a.clock.Now().Format("15:04:05"), msg.Text)
	if got.Redelivered {
		return a.answerAgain(msg, got)
	}
	return a.interpret(ctx, p, got.Turn, msg, die, "assistant")
}

// interpret has the model interpret msg, the message of turn: its tool
// calls become the turn's commands (Plan, Execute), and its answer from
// their results is delivered, as who. If die, the process dies after the
// commands ran and before the answer went out: interpret returns errDied.
//
// Another flow may interpret the same turn meanwhile — recovery in a
// process started while this one's model thought — and a turn is
// interpreted once: this flow's Plan or Deliver is then refused
// (ErrConflict), and it leaves the turn to the other (leftToAnother).
func (a *agent) interpret(ctx context.Context, p *process, turn turnframe.TurnID, msg message, die bool, who string) error {
	first := a.model.Next(msg, nil)
	if len(first.Calls) == 0 { // it answers at once: nothing to admit
		if err := p.rt.Deliver(ctx, account, turn, first.Answer); err != nil {
			return a.leftToAnother(ctx, p, turn, msg, err)
		}
		a.say("%s: %s", who, first.Answer)
		return nil
	}
	results, err := a.runTools(ctx, p, turn, msg, first.Calls)
	if err != nil {
		return a.leftToAnother(ctx, p, turn, msg, err)
	}
	if die {
		return errDied
	}
	return a.leftToAnother(ctx, p, turn, msg, a.answer(ctx, p, turn, msg, results, who))
}

// leftToAnother returns err, unless it is the refusal a flow meets when
// another flow has taken its turn over: ErrConflict on a turn planned (or
// further) by now. The turn is then that flow's to finish, and this one
// stops without an error.
func (a *agent) leftToAnother(ctx context.Context, p *process, turn turnframe.TurnID, msg message, err error) error {
	if !errors.Is(err, turnframe.ErrConflict) {
		return err
	}
	m, rerr := p.store.TurnPhase(ctx, account, turn)
	if rerr != nil || m.Phase < turnframe.PhasePlanned {
		return err
	}
	a.say("  turnframe: [%s] was interpreted by another flow meanwhile (its turn is %s): this one stops, and that one answers", msg.ID, m.Phase)
	return nil
}

// answerAgain answers a message the client sent again (the same message
// id): ReceiveMessage found the turn its first delivery began and wrote
// nothing, so no tool runs a second time. A delivered turn's answer is
// sent again; an abandoned one will never answer, and the user is told so;
// any other is still running — in the first delivery's process, or after a
// crash in recovery's, which finishes it — and answers when it finishes.
func (a *agent) answerAgain(msg message, got turnframe.Received) error {
	a.say("  turnframe: [%s] was received before (its turn is %s): nothing runs again", msg.ID, got.Phase)
	switch {
	case got.Response != "":
		a.say("assistant (again, from the first turn): %s", got.Response)
	case got.Phase == turnframe.PhaseAbandoned:
		a.say("assistant: I gave up on that message before finishing it. Please ask me again.")
	default:
		a.say("assistant: I am still working on that.")
	}
	return nil
}

// runTools admits calls as the turn's commands and executes them, and
// returns what the journal then says of each.
func (a *agent) runTools(ctx context.Context, p *process, turn turnframe.TurnID, msg message, calls []toolCall) ([]toolResult, error) {
	cmds := make([]turnframe.Command, len(calls))
	for i, c := range calls {
		cmds[i] = command(msg.ID, c)
		a.say("  model calls %s %s  key %s", c.Name, c.Args, cmds[i].Key)
	}
	plan, err := p.rt.Plan(ctx, account, turn, turnframe.Plan{Commands: cmds})
	if err != nil {
		return nil, err
	}
	if _, err := p.rt.Execute(ctx, account, turn, a.mux); err != nil {
		return nil, err
	}
	return a.results(ctx, p, plan)
}

// results reads what became of each admitted command, after Execute: a
// command an earlier turn admitted (a repeated message) is said so.
func (a *agent) results(ctx context.Context, p *process, plan turnframe.PlanReport) ([]toolResult, error) {
	var out []toolResult
	for _, adm := range plan.Admissions {
		e, err := p.store.ByKey(ctx, account, adm.Entry.Key)
		if err != nil {
			return nil, err
		}
		r, err := resultOf(ctx, p.store, e, adm.Kind == turnframe.AdmittedByAnotherTurn)
		if err != nil {
			return nil, err
		}
		a.say("  tool %s [%s] → %s", r.Call.Name, r.Key, r.Text)
		out = append(out, r)
	}
	return out, nil
}

// answer asks the model for its answer to msg from results and delivers
// it, as who.
func (a *agent) answer(ctx context.Context, p *process, turn turnframe.TurnID, msg message, results []toolResult, who string) error {
	st := a.model.Next(msg, results)
	if len(st.Calls) > 0 || st.Answer == "" {
		return fmt.Errorf("the model was to answer %s, not call tools again", msg.ID)
	}
	if err := p.rt.Deliver(ctx, account, turn, st.Answer); err != nil {
		return err
	}
	a.say("%s: %s", who, st.Answer)
	return nil
}

// recoverer acts on recovery's decisions for p (a RecoveryHandler).
type recoverer struct {
	a *agent
	p *process
}

// RegenerateResponse answers a turn whose commands ran but whose answer
// never went out, from its journal entries: the model is told what the
// journal says, not what the dead process knew.
func (r recoverer) RegenerateResponse(ctx context.Context, t turnframe.TurnPhaseMarker, act turnframe.RecoveryAction) error {
	stored, err := r.p.rec.StoredTurn(ctx, t.Account, t.Turn)
	if err != nil {
		return err
	}
	entries, err := r.p.store.ForTurn(ctx, t.Account, t.Turn)
	if err != nil {
		return err
	}
	msg := message{ID: string(stored.MessageID), Text: stored.Text}
	var results []toolResult
	for _, e := range entries {
		res, err := resultOf(ctx, r.p.store, e, false)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	ran := "committed its commands"
	if len(act.Entries) > 0 {
		ran = "ran its commands (some outcomes still being verified)"
	}
	r.a.say("  recovery: turn of [%s] %s but was never answered; the answer is regenerated from the journal", msg.ID, ran)
	return r.a.answer(ctx, r.p, t.Turn, msg, results, "assistant (delivered by recovery)")
}

// ResumeCommands runs a turn's pending commands again by key, then
// answers it if it was never answered.
func (r recoverer) ResumeCommands(ctx context.Context, t turnframe.TurnPhaseMarker, action turnframe.RecoveryAction) error {
	rep, err := r.p.rt.Execute(ctx, t.Account, t.Turn, r.a.mux)
	if err != nil {
		return err
	}
	r.a.say("  recovery: resumed the pending commands of a turn (%d entries)", len(rep.Results))
	if action.Phase == turnframe.PhaseDelivered {
		return nil
	}
	return r.RegenerateResponse(ctx, t, action)
}

// RestartInterpretation interprets again a turn that died before the
// model's tool calls were admitted (the process died while the model
// thought): nothing ran, so the model is given the stored message again,
// and the turn goes on as its first delivery would have — its tools run
// and its answer is delivered. It must not be abandoned for the client to
// send the message again: a resend under the same message id is a
// redelivery of this very turn, which runs nothing (DESIGN.md §7, The
// inbox), so the message would never be answered. A turn received without
// a message id, from which its commands' keys would come, is abandoned.
// (The story never dies there.)
func (r recoverer) RestartInterpretation(ctx context.Context, t turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	stored, err := r.p.rec.StoredTurn(ctx, t.Account, t.Turn)
	if err != nil {
		return err
	}
	if stored.MessageID == "" {
		return r.p.rt.Abandon(ctx, t.Account, t.Turn, "agent.no_message_id")
	}
	msg := message{ID: string(stored.MessageID), Text: stored.Text}
	r.a.say("  recovery: turn of [%s] died before its tool calls were admitted; the model interprets it again", msg.ID)
	return r.a.interpret(ctx, r.p, t.Turn, msg, false, "assistant (delivered by recovery)")
}
