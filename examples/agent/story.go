package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// The user's messages, with the ids her client gives them.
var (
	msgSearch = message{ID: "m1", Text: askSearch}
	msgBook   = message{ID: "m2", Text: askBook}
	msgEmail  = message{ID: "m3", Text: askEmail}
)

// lateWait bounds, in real time, the wait for the hung mail call's own
// answer, which comes as soon as its client gives up at the deadline.
const lateWait = 10 * time.Second

// play runs the story and returns the process still running at its end.
func (a *agent) play(ctx context.Context) (*process, error) {
	p1, err := a.start(ctx, "process-1", true)
	if err != nil {
		return nil, err
	}
	a.say("== process-1 starts on a new SQLite file")
	if err := a.respond(ctx, p1, msgSearch, false); err != nil {
		p1.close()
		return nil, err
	}
	if err := a.respond(ctx, p1, msgBook, true); !errors.Is(err, errDied) {
		p1.close()
		return nil, fmt.Errorf("process-1 was to die in [m2], got %v", err)
	}
	a.say("== process-1 dies: [m2]'s commands committed, its answer never went out")
	// In one OS process, dying is closing the store under the process:
	// its dispatcher stops (settling a send in flight), and process-2 is a
	// new agent (restarted), which gets the file and the world outside —
	// nothing process-1 held in memory.
	if err := p1.close(); err != nil {
		return nil, err
	}
	b := a.restarted()
	p2, err := b.start(ctx, "process-2", false)
	if err != nil {
		return nil, err
	}
	if err := b.afterRestart(ctx, p2); err != nil {
		p2.close()
		return nil, err
	}
	return p2, nil
}

// afterRestart is the story from the restart on.
func (a *agent) afterRestart(ctx context.Context, p *process) error {
	a.clock.Advance(10 * time.Second)
	a.say("== process-2 starts on the same file and runs Recover")
	rep, err := p.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{a, p})
	if err != nil {
		return err
	}
	for _, e := range rep.AwaitingApproval {
		a.say("  recovery: %s [%s] awaits approval", e.Name, e.Key)
	}
	a.say("== the user's client never saw the answer to [m2] and sends it again")
	if err := a.respond(ctx, p, msgBook, false); err != nil {
		return err
	}
	if err := a.approve(ctx, p, "m2/c2"); err != nil {
		return err
	}
	if err := a.respond(ctx, p, msgEmail, false); err != nil {
		return err
	}
	if err := a.waitLate(ctx); err != nil {
		return err
	}
	return a.verifyLater(ctx, p)
}

// approve has the user approve the payment: the entry moves to Pending,
// and Execute of its turn runs it, after that turn's answer went out.
func (a *agent) approve(ctx context.Context, p *process, key turnframe.IdempotencyKey) error {
	a.clock.Advance(30 * time.Second)
	entry, err := p.rt.Approve(ctx, account, key, "user:ana", "approved in the app")
	if err != nil {
		return err
	}
	a.say("user [%s] approves %s [%s]", a.clock.Now().Format("15:04:05"), entry.Name, key)
	rep, err := p.rt.Execute(ctx, account, entry.Turn, a.mux)
	if err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Key == key {
			a.say("  Execute runs %s [%s] → %s; its payments message is in the outbox", r.Command, r.Key, r.Kind)
		}
	}
	return nil
}

// waitLate waits until turnframe recorded the hung mail call's late
// answer as evidence, so the transcript stays in order.
func (a *agent) waitLate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lateWait)
	defer cancel()
	select {
	case <-a.late:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the hung mail call never answered: %w", ctx.Err())
	}
}

// verifyLater runs Recover after the mail's settle delay: the policy looks
// the email up by key, finds it sent, and settles it; the user is told.
func (a *agent) verifyLater(ctx context.Context, p *process) error {
	a.clock.Advance(time.Minute)
	a.say("== a minute later, Recover runs again")
	rep, err := p.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{a, p})
	if err != nil {
		return err
	}
	for _, r := range rep.Policy {
		a.say("  recovery: %s [%s] was outcome unknown; the policy of its %s remote: %s (%s)",
			r.Uncertain.Name, r.Uncertain.Key, r.Kind, r.Outcome, r.Code)
	}
	e, err := p.store.ByKey(ctx, account, commandKey(msgEmail.ID, script[askEmail][0]))
	if err != nil {
		return err
	}
	res, err := resultOf(ctx, p.store, e, false)
	if err != nil {
		return err
	}
	a.say("  tool %s [%s] is now %s (%s)", res.Call.Name, res.Key, e.Status, e.Code)
	a.say("assistant (follow-up): We verified it: %s", sentence(res))
	return nil
}
