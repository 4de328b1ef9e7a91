package main

import (
	"context"
	"fmt"

	"github.com/turnframe/turnframe"
)

// maxSweeps bounds the dispatch sweeps of one dispatchUntilIdle: far more
// than the demo needs, so a dispatcher that never finishes is a failure, not
// a hang.
const maxSweeps = 50

// sweep runs one dispatch sweep at the demo's time and narrates each row.
// A send that hung answers late, from its own goroutine, after RunOnce
// returned: sweep waits until that answer is recorded as evidence, so the
// narrative (and the row's history) is the same on every run.
func (d *demo) sweep(ctx context.Context, p *process) (turnframe.DispatchReport, error) {
	late := d.late.count()
	rep, err := p.disp.RunOnce(ctx, d.clock.Now())
	if err != nil {
		return rep, err
	}
	if rep.IsEmpty() {
		return rep, nil
	}
	d.say("dispatch: %s claimed %d due row(s)", p.name, rep.Claimed())
	hung := 0
	for _, list := range [][]turnframe.OutboxID{rep.Completed, rep.Retried, rep.Failed, rep.Unknown, rep.Unsettled} {
		for _, id := range list {
			rec, err := p.store.GetOutbox(ctx, id)
			if err != nil {
				return rep, err
			}
			d.narrateRow(rec)
			if rec.Status == turnframe.OutboxOutcomeUnknown && rec.LastCode == turnframe.CodeSendTimeout {
				hung++
			}
		}
	}
	if hung > 0 {
		if err := d.late.waitFor(ctx, late+hung); err != nil {
			return rep, err
		}
		d.say("  the hung request's own answer came after its deadline: kept as evidence in the row's history, never read as its outcome")
	}
	return rep, nil
}

func (d *demo) narrateRow(rec turnframe.OutboxRecord) {
	var what string
	switch rec.Status {
	case turnframe.OutboxCompleted:
		what = fmt.Sprintf("completed, %s", rec.RemoteRef)
	case turnframe.OutboxPending:
		what = fmt.Sprintf("retryable (%s): due again in %v", rec.LastCode, rec.DueAt.Sub(d.clock.Now()))
	case turnframe.OutboxFailed:
		what = fmt.Sprintf("failed, permanent (%s)", rec.LastCode)
	case turnframe.OutboxOutcomeUnknown:
		what = fmt.Sprintf("outcome unknown (%s): never sent again blindly; Recover resolves it by its remote's policy", rec.LastCode)
	default:
		what = rec.Status.String()
	}
	d.say("  %-20s to %-8s attempt %d: %s", d.rowName(rec.ID), rec.Destination, rec.Attempts, what)
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
