package main

import (
	"context"
	"fmt"

	"github.com/turnframe/turnframe"
)

// recoverTurns runs the recovery sweep a restarted process runs first.
func (d *demo) recoverTurns(ctx context.Context, p *process) error {
	unfinished, err := p.rec.Unfinished(ctx, turnframe.RecoveryScope{}, 100)
	if err != nil {
		return err
	}
	d.say("recovery sweep: %d unfinished turn(s) in the file", len(unfinished))
	rep, err := p.rec.Sweep(ctx, turnframe.RecoveryScope{}, 100, &demoRecovery{d: d, p: p})
	if err != nil {
		return err
	}
	for _, f := range rep.Failures {
		return fmt.Errorf("recovery of turn %v (%v): %w", f.Turn, f.Action, f.Err)
	}
	return nil
}

// demoRecovery is the RecoveryHandler of the restarted process.
type demoRecovery struct {
	d *demo
	p *process
}

var _ turnframe.RecoveryHandler = (*demoRecovery)(nil)

func (r *demoRecovery) effectOf(turn turnframe.TurnID) (*effect, error) {
	e := r.d.byTurn[turn]
	if e == nil {
		return nil, fmt.Errorf("turn %v is not one of the demo's", turn)
	}
	return e, nil
}

// RestartInterpretation cannot happen in the demo: every turn was planned.
func (r *demoRecovery) RestartInterpretation(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return fmt.Errorf("turn %v was never planned", m.Turn)
}

// ResumeCommands runs the turn's pending commands again through Execute,
// which recognises them by key, then answers.
func (r *demoRecovery) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	e, err := r.effectOf(m.Turn)
	if err != nil {
		return err
	}
	r.d.say("turn %d  %s: %d command(s) pending, phase %s", e.n, a.Kind, len(a.Entries), a.Phase)
	rep, err := r.p.rt.Execute(ctx, m.Account, m.Turn, r.p.shop)
	if err != nil {
		return err
	}
	var ids []turnframe.EventID
	for _, res := range rep.Results {
		if res.Kind != turnframe.ResultCommitted || len(res.OutboxIDs) != 1 {
			return fmt.Errorf("turn %d: resumed %s ended %v", e.n, res.Command, res.Kind)
		}
		entry, err := r.p.store.ByKey(ctx, m.Account, res.Key)
		if err != nil {
			return err
		}
		r.d.noteRow(e, res.OutboxIDs[0])
		r.d.say("turn %d  %s resumed under the same key (attempt %d): committed, outbox row %s",
			e.n, res.Command, entry.Attempts, res.OutboxIDs[0])
		ids = append(ids, res.EventIDs...)
	}
	return r.d.deliver(ctx, r.p, e, ids)
}

// RegenerateResponse answers from the events the turn committed; it executes
// nothing.
func (r *demoRecovery) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	e, err := r.effectOf(m.Turn)
	if err != nil {
		return err
	}
	question := ""
	if len(a.AnswerTasks) > 0 {
		question = a.AnswerTasks[0].Question
	}
	r.d.say("turn %d  %s: phase %s, %d committed event(s), question %q; nothing runs again",
		e.n, a.Kind, a.Phase, len(a.Events), question)
	text := answer(a.Events)
	if err := r.p.rt.Deliver(ctx, m.Account, m.Turn, text); err != nil {
		return err
	}
	r.d.say("turn %d  assistant: %q", e.n, text)
	return nil
}

// ReconcileExternal settles commands whose outcome is unknown against the
// ledger: a charge found there is completed; anything else stays unknown for
// an operator, never run again blindly.
func (r *demoRecovery) ReconcileExternal(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	for _, entry := range a.Entries {
		remote := turnframe.OutboxEntry{Account: m.Account, Key: entry.Key}.RemoteKey()
		verdict := turnframe.VerdictUnresolved
		if r.d.server.charged(remote) {
			verdict = turnframe.VerdictCompleted
		}
		if err := r.p.rt.ReconcileCommand(ctx, m.Account, entry.Key, verdict, ""); err != nil {
			return err
		}
		r.d.say("turn %v  %s: command %s reconciled %s", m.Turn, a.Kind, entry.Key, verdict)
	}
	return nil
}
