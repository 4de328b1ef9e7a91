package main

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// operator plays the person who settles what the policy handed over: they
// list what needs intervention (as 'turnframe status' does), find out from
// the remote by other means — here they phone the bakery, which reads its
// order book — and settle each row through Recovery.Settle as
// ActorOperator (as 'turnframe settle' does). A row found not to have
// arrived is resent, and dispatched. Then they read one such row's audit
// trail, as 'turnframe history' prints it.
func (d *demo) operator(ctx context.Context, p *process) error {
	rows, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Limit: 100})
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	d.clock.Advance(time.Minute) // a person takes a while
	d.say("operator: 'turnframe status' lists %d outbox row(s) that need intervention", len(rows))
	resent := false
	for _, rec := range rows {
		dec := turnframe.Decision{Actor: turnframe.ActorOperator}
		if ref, found := d.server.lookup(rec.Destination, rec.RemoteKey()); found {
			d.say("operator: phones the %s about key %s: it has order %s", rec.Destination, rec.RemoteKey(), ref)
			dec.Verdict, dec.Code, dec.RemoteRef = turnframe.VerdictCompleted, "operator.completed", ref
			dec.Note = "the " + rec.Destination + " confirmed order " + ref + " by phone"
		} else {
			d.say("operator: phones the %s about key %s: it has no such order", rec.Destination, rec.RemoteKey())
			dec.Verdict, dec.Code = turnframe.VerdictResend, "operator.resend"
			dec.Note = "the " + rec.Destination + " has no order under this key, by phone: send it again"
			resent = true
		}
		if err := p.rec.Settle(ctx, turnframe.OutboxSubject(rec.Account, rec.ID), dec); err != nil {
			return fmt.Errorf("operator: settle %s: %w", rec.ID, err)
		}
		after, err := p.store.GetOutbox(ctx, rec.ID)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("turnframe settle %s %s", rec.ID, dec.Verdict)
		if dec.RemoteRef != "" {
			line += " --ref " + dec.RemoteRef
		}
		d.say("operator: %s --note %q: %s → %s", line, dec.Note, rec.Status, after.Status)
	}
	if resent {
		if err := d.dispatchUntilIdle(ctx, p); err != nil {
			return err
		}
	}
	subjects, err := subjectsOfID(ctx, sqliteOps{p.store}, rows[0].ID)
	if err != nil {
		return err
	}
	d.say("operator: turnframe history %s", rows[0].ID)
	fmt.Fprintf(d.w, "history of %s:\n", subjects[0].title)
	return printHistory(ctx, d.w, p.store, subjects[0].subject)
}
