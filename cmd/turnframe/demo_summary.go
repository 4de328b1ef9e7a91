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
// effect did not land exactly once, or something was left unknown.
var errDiscrepancy = errors.New("not every effect landed exactly once")

// summaryColumns are the closing table's: the effect, its remote, the
// trouble it met, the remote ledger's count of it and of the repeats the
// remote absorbed, the final status of its outbox row (and its attempts),
// of its turn and of its journal entry, and how its unknown outcome, if it
// had one, was resolved — read from the row's audit trail.
var summaryColumns = []string{"EFFECT", "TO", "TROUBLE", "LEDGER", "REPEATS", "ROW", "ATTEMPTS", "TURN", "JOURNAL", "RESOLUTION"}

// summary prints one line per intended effect and checks that every effect
// landed exactly once (a remote that deduplicates may have absorbed a
// repeat), that nothing else landed, and that nothing is left unknown but
// what a person settled.
func (d *demo) summary(ctx context.Context, p *process) error {
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var table [][]string
	intended := make(map[string]map[string]bool)
	settledByHand := 0
	for _, e := range d.effects {
		if intended[e.dest] == nil {
			intended[e.dest] = make(map[string]bool)
		}
		remote := e.remoteKey()
		intended[e.dest][remote] = true
		ledger, _ := d.server.Ledger(e.dest)
		l := ledger[remote]
		if l.Charges != 1 {
			problem("%s: the %s ledger holds it %d time(s) under %q, want 1", e.label(), e.dest, l.Charges, remote)
		}
		row, rowProblems, err := d.summaryRow(ctx, p, e)
		if err != nil {
			return err
		}
		problems = append(problems, rowProblems...)
		if strings.Contains(row.resolution, "settled by "+string(turnframe.ActorOperator)) {
			settledByHand++
		}
		table = append(table, []string{e.label(), e.dest, e.trouble.String(), strconv.Itoa(l.Charges), strconv.Itoa(l.Repeats),
			row.status, row.attempts, row.phase, row.journal, row.resolution})
	}
	for dest, keys := range intended {
		ledger, all := d.server.Ledger(dest)
		for _, k := range all {
			if !keys[k] && ledger[k].Charges > 0 {
				problem("the %s ledger holds an effect nobody intended, under %q", dest, k)
			}
		}
	}
	left, err := d.leftUncertain(ctx, p)
	if err != nil {
		return err
	}
	problems = append(problems, left...)
	if err := writeTable(d.w, summaryColumns, table); err != nil {
		return err
	}
	fmt.Fprintln(d.w)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(d.w, "DISCREPANCY: %s\n", p)
		}
		return fmt.Errorf("%w: %s", errDiscrepancy, strings.Join(problems, "; "))
	}
	fmt.Fprintf(d.w, "every effect landed exactly once: %d intended, %d in the ledgers; nothing left unknown (%d settled by a person, as the table says)\n",
		len(d.effects), len(d.effects), settledByHand)
	fmt.Fprintf(d.w, "look inside: go run ./cmd/turnframe status --db %s\n", d.path)
	return nil
}

// effectRow is what the closing table says of one effect's row, turn and
// journal entry.
type effectRow struct {
	status, attempts, phase, journal, resolution string
}

// summaryRow reads e's outbox row, its history, its turn and its journal
// entry, and says what is wrong with them.
func (d *demo) summaryRow(ctx context.Context, p *process, e *effect) (effectRow, []string, error) {
	var row effectRow
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if e.row.IsZero() {
		problem("%s: its command never committed an outbox row", e.label())
	} else {
		rec, err := p.store.GetOutbox(ctx, e.row)
		if err != nil {
			return row, nil, err
		}
		row.status, row.attempts = rec.Status.String(), strconv.Itoa(rec.Attempts)
		if rec.Status != turnframe.OutboxCompleted {
			problem("%s: outbox row %s is %s, want completed", e.label(), rec.ID, rec.Status)
		}
		var history []turnframe.HistoryRecord
		if err := eachHistoryPage(ctx, p.store, turnframe.OutboxSubject(rec.Account, rec.ID), func(page []turnframe.HistoryRecord) error {
			history = append(history, page...)
			return nil
		}); err != nil {
			return row, nil, err
		}
		var why string
		row.resolution, why = resolution(history)
		if why != "" {
			problem("%s: %s", e.label(), why)
		}
	}
	if !e.turn.IsZero() {
		m, err := p.store.TurnPhase(ctx, demoAccount, e.turn)
		if err != nil {
			return row, nil, err
		}
		row.phase = m.Phase.String()
		if m.Phase != turnframe.PhaseDelivered {
			problem("turn %d is %s, want delivered", e.n, m.Phase)
		}
		entry, err := p.store.ByKey(ctx, demoAccount, e.key)
		if err != nil {
			return row, nil, err
		}
		row.journal = entry.Status.String()
		if entry.Status != turnframe.JournalCommitted {
			problem("turn %d: command %s is %s, want committed", e.n, e.key, entry.Status)
		}
	}
	return row, problems, nil
}

// resolution reads from a row's history, oldest first, how each of its
// unknown outcomes was resolved, in words, joined by " → "; "" for a row
// whose outcome was never unknown. why is not empty when a row that needed
// intervention was moved on by anyone but a person (ActorOperator), or was
// never moved on.
func resolution(history []turnframe.HistoryRecord) (text, why string) {
	unknown := turnframe.OutboxOutcomeUnknown.String()
	intervention := turnframe.OutboxNeedsIntervention.String()
	var steps []string
	waiting := false // it needs intervention, and nobody settled it yet
	for _, h := range history {
		if h.Evidence {
			continue
		}
		switch {
		case h.From == unknown && h.To == intervention:
			steps = append(steps, "needs intervention")
			waiting = true
		case h.From == unknown && h.Actor == turnframe.ActorPolicy && h.Code == turnframe.CodeVerifiedHappened:
			steps = append(steps, "verified: happened")
		case h.From == unknown && h.Actor == turnframe.ActorPolicy && h.Code == turnframe.CodeVerifiedNotHappened:
			steps = append(steps, "verified: never arrived; resent under the same key")
		case h.From == unknown && h.Actor == turnframe.ActorPolicy && h.Code == turnframe.CodeResent:
			steps = append(steps, "resent under the same key (remote deduplicates)")
		case h.From == unknown || h.From == intervention:
			steps = append(steps, fmt.Sprintf("settled by %s: %s", h.Actor, verdictWord(h.To)))
			if h.From == intervention {
				waiting = false
				if h.Actor != turnframe.ActorOperator {
					why = fmt.Sprintf("it needed intervention and was settled by %s, not by a person", h.Actor)
				}
			}
		}
	}
	if waiting {
		why = "it still needs intervention"
	}
	return strings.Join(steps, " → "), why
}

// verdictWord names the verdict that moved an unknown row to status to.
func verdictWord(to string) string {
	if to == turnframe.OutboxPending.String() {
		return "resend"
	}
	return to
}

// leftUncertain names every outbox row still outcome_unknown or needing
// intervention: the demo leaves none.
func (d *demo) leftUncertain(ctx context.Context, p *process) ([]string, error) {
	var problems []string
	for _, s := range []turnframe.OutboxStatus{turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention} {
		rows, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: s, Limit: 100})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			problems = append(problems, fmt.Sprintf("outbox row %s (%s) is left %s", r.ID, d.rowName(r.ID), s))
		}
	}
	return problems, nil
}
