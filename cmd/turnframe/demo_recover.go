package main

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// recover calls Recover, the one recovery call an application makes at
// start-up and from its loop, and narrates its report. The handler narrates
// the turns it resumes and answers as Recover hands them over.
func (d *demo) recover(ctx context.Context, p *process, when string, scope turnframe.RecoveryScope) error {
	d.clock.Advance(time.Second)
	d.say("recover: %s calls Recover %s", p.name, when)
	rep, err := p.rec.Recover(ctx, scope, &demoRecovery{d: d, p: p})
	if err != nil {
		return err
	}
	d.say("recover: its report: %d claim(s) expired, %d unknown outcome(s) handed to their remote's policy, %d turn(s) recovered, %d need(s) intervention",
		len(rep.Expired), len(rep.Policy), rep.Turns.Turns, len(rep.NeedsIntervention))
	for _, id := range rep.Expired {
		d.say("recover:   the claim on the %s row had ended: outcome_unknown (%s), since its send may have started",
			d.rowName(id), turnframe.CodeLeaseEnded)
	}
	for _, r := range rep.Policy {
		if r.Err != nil {
			return fmt.Errorf("recover: the policy could not settle %s %s: %w", r.Uncertain.Subject.Kind, r.Uncertain.Subject.Ref, r.Err)
		}
		d.say("recover:   %s (%s, %s): %s", d.subjectName(r.Uncertain), r.Uncertain.Name, r.Kind, policyWords(r))
	}
	for _, f := range rep.Turns.Failures {
		return fmt.Errorf("recovery of turn %v (%v): %w", f.Turn, f.Action, f.Err)
	}
	for _, u := range rep.NeedsIntervention {
		d.say("recover:   needs intervention: %s (%s, %s): a person must settle it", d.subjectName(u), u.Name, u.Code)
	}
	return nil
}

// subjectName names an uncertain effect for the narrative.
func (d *demo) subjectName(u turnframe.Uncertain) string {
	if u.Subject.Kind == turnframe.SubjectOutbox {
		if id, err := turnframe.ParseOutboxID(u.Subject.Ref); err == nil {
			return "the " + d.rowName(id) + " row"
		}
	}
	return u.Subject.Kind.String() + " " + u.Subject.Ref
}

// policyWords says what the policy did with one unknown outcome.
func policyWords(r turnframe.PolicyResult) string {
	switch r.Outcome {
	case turnframe.PolicyCompleted:
		return "asked the remote: it happened; completed"
	case turnframe.PolicyResent:
		if r.Code == turnframe.CodeVerifiedNotHappened {
			return "asked the remote: it never arrived; pending again under the same key"
		}
		return "the remote deduplicates and still remembers the key: pending again, to be sent under the same key"
	case turnframe.PolicyEscalated:
		return "nothing can settle it safely: needs_intervention (" + r.Code + ")"
	case turnframe.PolicyRejected:
		return "asked the remote: it never arrived, and its turn was abandoned: rejected"
	case turnframe.PolicyWaiting, turnframe.PolicyUnsure:
		return fmt.Sprintf("%s; looks again after %s", r.Outcome, r.NextAt.Format("15:04:05"))
	}
	return r.Outcome.String() + ": no Remote is declared for it; it waits for Settle"
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
		r.d.say("turn %d  %s resumed under the same key (attempt %d): committed, %s outbox row %s",
			e.n, res.Command, entry.Attempts, e.dest, res.OutboxIDs[0])
		ids = append(ids, res.EventIDs...)
	}
	return r.d.deliver(ctx, r.p, e, ids)
}

// RegenerateResponse answers from the events the turn committed, and says
// which of its commands' outcomes are being verified when recovery answers
// around unknowns (a.Entries); it executes nothing.
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
	if len(a.Entries) > 0 {
		text = answerAround(a.Events, a.Entries)
	}
	if err := r.p.rt.Deliver(ctx, m.Account, m.Turn, text); err != nil {
		return err
	}
	r.d.say("turn %d  assistant: %q", e.n, text)
	return nil
}
