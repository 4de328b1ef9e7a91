package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The row's outcome is unknown. Operator 1 runs 'turnframe settle --code
// ops.ledger_checked ID completed'; settle reads the row and its history.
// Before its write, operator 2 (same default actor, the team's same code)
// escalates it: outcome_unknown → needs_intervention. The attempt is the
// same, so operator 1's completion lands (needs_intervention → completed).
// Its line must name that move, not operator 2's escalation.
func TestSettlePrintsItsOwnVerdictNotAnotherOperatorsEscalation(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	const code = "ops.ledger_checked"
	racing := &historyReadRace{opStore: sqliteOps{store}, during: func() {
		second := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return now }))
		is.NoErr(second.Settle(ctx, turnframe.OutboxSubject(fixtureAccount, f.unknown),
			turnframe.Decision{Verdict: turnframe.VerdictEscalate, Code: code, Actor: turnframe.ActorOperator}))
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{f.unknown.String(), "completed"}, settleFlags{actor: string(turnframe.ActorOperator), code: code})
	is.NoErr(err)
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	is.True(racing.done.Load())
	t.Log(out.String())
	is.Equal(dispStatus(t, store, f.unknown), turnframe.OutboxCompleted) // operator 1's completion landed
	is.True(strings.Contains(out.String(), "→ completed"))               // the move it made
	is.True(!strings.Contains(out.String(), "needs_intervention by"))    // not operator 2's escalation
}

// The same for a journal entry: 'turnframe settle --account acme --code
// ops.ledger_checked key-ask-remote completed' prints another operator's
// escalation, landed between its read and its write, as its own move.
func TestSettleOfAnEntryPrintsItsOwnVerdictNotAnotherOperatorsEscalation(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	const code = "ops.ledger_checked"
	const key = turnframe.IdempotencyKey("key-ask-remote")
	racing := &historyReadRace{opStore: sqliteOps{store}, during: func() {
		second := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return now }))
		is.NoErr(second.Settle(ctx, turnframe.JournalSubject(fixtureAccount, key),
			turnframe.Decision{Verdict: turnframe.VerdictEscalate, Code: code, Actor: turnframe.ActorOperator}))
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{string(key), "completed"}, settleFlags{account: string(fixtureAccount), actor: string(turnframe.ActorOperator), code: code})
	is.NoErr(err)
	is.NoErr(settleEntry(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	is.True(racing.done.Load())
	t.Log(out.String())
	is.True(strings.Contains(out.String(), "→ committed"))            // the move it made
	is.True(!strings.Contains(out.String(), "needs_intervention by")) // not operator 2's escalation
}
