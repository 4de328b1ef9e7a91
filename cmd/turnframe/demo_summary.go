package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/turnframe/turnframe"
)

// errDiscrepancy is wrapped by the error of a demo in which some intended
// charge did not land exactly once.
var errDiscrepancy = errors.New("not every charge landed exactly once")

// summary prints one line per intended charge — the ledger's count, the
// final state of its outbox row and of its turn — and checks that every
// charge landed exactly once, was never sent again after it landed, and
// that nothing else was charged.
func (d *demo) summary(ctx context.Context, p *process) error {
	ledger, keys := d.server.Ledger()
	rows, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		return err
	}
	rowsByKey := make(map[turnframe.IdempotencyKey]int)
	for _, r := range rows {
		rowsByKey[r.Key]++
	}
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	header := []string{"CHARGE", "MISBEHAVIOUR", "LEDGER", "RESENT", "OUTBOX ROW", "STATUS", "ATTEMPTS", "TURN", "PHASE", "JOURNAL"}
	var table [][]string
	intended := make(map[string]bool)
	for _, e := range d.effects {
		remote := e.remoteKey()
		intended[remote] = true
		l := ledger[remote]
		row := []string{e.label(), e.trouble.String(), strconv.Itoa(l.Charges), strconv.Itoa(l.Repeats)}
		if l.Charges != 1 {
			problem("%s: the ledger holds %d charge(s) under %q, want 1", e.label(), l.Charges, remote)
		}
		if l.Repeats != 0 {
			problem("%s: sent %d more time(s) after it landed", e.label(), l.Repeats)
		}
		if n := rowsByKey[e.key]; n != 1 {
			problem("%s: %d outbox row(s) under key %q, want 1", e.label(), n, e.key)
		}
		if e.row.IsZero() {
			problem("%s: its command never committed an outbox row", e.label())
			row = append(row, "", "", "")
		} else {
			rec, err := p.store.GetOutbox(ctx, e.row)
			if err != nil {
				return err
			}
			row = append(row, rec.ID.String(), rec.Status.String(), strconv.Itoa(rec.Attempts))
			if rec.Status != turnframe.OutboxCompleted {
				problem("%s: outbox row %s is %s, want completed", e.label(), rec.ID, rec.Status)
			}
		}
		phase, status := "", ""
		if !e.turn.IsZero() {
			m, err := p.store.TurnPhase(ctx, demoAccount, e.turn)
			if err != nil {
				return err
			}
			phase = m.Phase.String()
			if m.Phase != turnframe.PhaseDelivered {
				problem("turn %d is %s, want delivered", e.n, m.Phase)
			}
			entry, err := p.store.ByKey(ctx, demoAccount, e.key)
			if err != nil {
				return err
			}
			status = entry.Status.String()
			if entry.Status != turnframe.JournalCommitted {
				problem("turn %d: command %s is %s, want committed", e.n, e.key, entry.Status)
			}
		}
		table = append(table, append(row, strconv.Itoa(e.n), phase, status))
	}
	for _, k := range keys {
		if !intended[k] && ledger[k].Charges > 0 {
			problem("the ledger holds a charge nobody intended, under %q", k)
		}
	}
	if err := writeTable(d.w, header, table); err != nil {
		return err
	}
	fmt.Fprintln(d.w)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(d.w, "DISCREPANCY: %s\n", p)
		}
		return fmt.Errorf("%w: %s", errDiscrepancy, strings.Join(problems, "; "))
	}
	fmt.Fprintf(d.w, "every charge landed exactly once: %d intended, %d in the ledger, none sent again after it landed\n",
		len(d.effects), len(d.effects))
	fmt.Fprintf(d.w, "look inside: go run ./cmd/turnframe status --db %s\n", d.path)
	return nil
}
