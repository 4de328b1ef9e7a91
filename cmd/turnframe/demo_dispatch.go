package main

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// maxSweeps bounds the dispatch sweeps of one settleOutbox round: far more
// than the demo needs, so a dispatcher that never finishes is a failure, not
// a hang.
const maxSweeps = 50

// sweep runs one dispatch sweep at the demo's time and narrates each row.
func (d *demo) sweep(ctx context.Context, p *process) (turnframe.DispatchReport, error) {
	rep, err := p.disp.RunOnce(ctx, d.clock.Now())
	if err != nil {
		return rep, err
	}
	if rep.IsEmpty() {
		return rep, nil
	}
	d.say("dispatch: %s claimed %d due row(s)", p.name, rep.Claimed())
	for _, list := range [][]turnframe.OutboxID{rep.Completed, rep.Retried, rep.Failed, rep.Unknown, rep.Unsettled} {
		for _, id := range list {
			if err := d.narrateRow(ctx, p, id); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

func (d *demo) narrateRow(ctx context.Context, p *process, id turnframe.OutboxID) error {
	rec, err := p.store.GetOutbox(ctx, id)
	if err != nil {
		return err
	}
	name := id.String()
	if e := d.byRow[id]; e != nil {
		name = e.label()
	}
	var what string
	switch rec.Status {
	case turnframe.OutboxCompleted:
		what = fmt.Sprintf("completed, charge %s", rec.RemoteRef)
	case turnframe.OutboxPending:
		what = fmt.Sprintf("retryable (%s): due again in %v", rec.LastCode, rec.DueAt.Sub(d.clock.Now()))
	case turnframe.OutboxFailed:
		what = fmt.Sprintf("failed, permanent (%s)", rec.LastCode)
	case turnframe.OutboxOutcomeUnknown:
		what = "outcome unknown: no answer within the send timeout; never sent again, to be reconciled"
	default:
		what = rec.Status.String()
	}
	d.say("  %-20s attempt %d: %s", name, rec.Attempts, what)
	return nil
}

// settleOutbox dispatches until nothing is due, reconciles unknown rows
// against the ledger, requeues refused rows once (the operator's
// "turnframe requeue"), and starts over until nothing is left to do.
func (d *demo) settleOutbox(ctx context.Context, p *process) error {
	requeued := make(map[turnframe.OutboxID]bool)
	for round := 0; round < 4; round++ {
		if err := d.dispatchUntilIdle(ctx, p); err != nil {
			return err
		}
		unknown, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 100})
		if err != nil {
			return err
		}
		for _, rec := range unknown {
			d.clock.Advance(time.Second)
			ans, err := p.disp.Reconcile(ctx, rec.ID, d.server.reconciler(), d.clock.Now())
			if err != nil {
				return err
			}
			d.say("reconcile: %s: asked the ledger for key %q: %s", d.rowName(rec.ID), rec.RemoteKey(), ans.Verdict)
		}
		failed, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxFailed, Limit: 100})
		if err != nil {
			return err
		}
		n := 0
		for _, rec := range failed {
			if requeued[rec.ID] {
				continue // refused twice: it stays failed, and the summary says so
			}
			requeued[rec.ID] = true
			n++
			d.clock.Advance(30 * time.Second)
			if err := p.store.Requeue(ctx, rec.ID, d.clock.Now()); err != nil {
				return err
			}
			d.say("operator: the card is fixed; `turnframe requeue %s` puts the %s row (%s) back to pending",
				rec.ID, d.rowName(rec.ID), rec.LastCode)
		}
		if len(unknown) == 0 && n == 0 {
			return nil
		}
	}
	return nil
}

// dispatchUntilIdle sweeps until no row is pending; when nothing is due yet,
// the clock jumps to the next due time instead of sleeping.
func (d *demo) dispatchUntilIdle(ctx context.Context, p *process) error {
	for range maxSweeps {
		rep, err := d.sweep(ctx, p)
		if err != nil {
			return err
		}
		if !rep.IsEmpty() {
			continue
		}
		pending, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxPending, Limit: 100})
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		next := pending[0].DueAt
		for _, rec := range pending[1:] {
			if rec.DueAt.Before(next) {
				next = rec.DueAt
			}
		}
		if !next.After(d.clock.Now()) {
			return fmt.Errorf("row %v is pending and due, yet the sweep claimed nothing", pending[0].ID)
		}
		d.say("dispatch: nothing due; the clock skips %v to the next backoff", next.Sub(d.clock.Now()))
		d.clock.AdvanceTo(next)
	}
	return fmt.Errorf("the outbox still had due rows after %d sweeps", maxSweeps)
}

func (d *demo) rowName(id turnframe.OutboxID) string {
	if e := d.byRow[id]; e != nil {
		return e.label()
	}
	return id.String()
}
