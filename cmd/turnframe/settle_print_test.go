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

// 'turnframe settle ID resend': the operator's resend lands
// (outcome_unknown → pending, code operator.resend); before settle reads
// the row back, a live dispatcher claims it, the remote answers 503 and the
// row goes back to pending with code http.503. The line printed names the
// operator's move (fixed in 99701c9/2456ebd) but the code of the
// dispatcher's later one: "outcome_unknown → pending by operator (code
// http.503)" — the operator's move never set that code.
func TestSettlePrintsTheCodeOfItsOwnMoveNotALaterSends(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	racing := &settleReadBack{opStore: sqliteOps{store}, during: func() {
		claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
		is.NoErr(err)
		for _, c := range claims {
			if c.ID == f.unknown {
				is.NoErr(turnframe.RetryClaim(ctx, store, c, "http.503", now.Add(time.Minute)))
			}
		}
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{f.unknown.String(), "resend"}, settleFlags{actor: string(turnframe.ActorOperator)})
	is.NoErr(err)
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	t.Log(out.String())
	is.True(strings.Contains(out.String(), "outcome_unknown → pending by operator")) // the move the operator made
	is.True(strings.Contains(out.String(), "code operator.resend"))                  // with the code it set
	is.True(!strings.Contains(out.String(), "http.503"))                             // not a later send's
}

// Two people settle one row under the default --actor, "operator".
// The first resends it (outcome_unknown → pending); before its settle reads
// the history back, the row is sent again, its outcome is unknown again,
// and the second operator fails it. The first is told "outcome_unknown →
// failed by operator (code operator.failed)": a move it did not make.
func TestSettlePrintsItsOwnMoveNotAnotherOperatorsUnderTheSameActor(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	racing := &settleReadBack{opStore: sqliteOps{store}, during: func() {
		claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
		is.NoErr(err)
		for _, c := range claims {
			if c.ID == f.unknown {
				is.NoErr(turnframe.MarkClaimUnknown(ctx, store, c, "", now))
			}
		}
		second := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return now }))
		is.NoErr(second.Settle(ctx, turnframe.OutboxSubject(fixtureAccount, f.unknown),
			turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "operator.failed", Actor: turnframe.ActorOperator}))
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{f.unknown.String(), "resend"}, settleFlags{actor: string(turnframe.ActorOperator)})
	is.NoErr(err)
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	t.Log(out.String())
	is.True(strings.Contains(out.String(), "outcome_unknown → pending by operator (code operator.resend)")) // the move this operator made
}
