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

// TestSettlePrintsItsOwnMoveWhenASecondIdenticalDecisionFollows:
// 5a2bf2d matches settle's own record by actor, code and note. Two people
// under the default actor make the same decision, resend, on one row at
// two of its attempts: the first resends it from needs_intervention;
// before it reads the history back the row is sent, goes unknown, and the
// second resends it from outcome_unknown. The first is told
// "outcome_unknown → pending": a move it did not make (the record it made
// names the attempt it decided on, which the match ignores).
func TestSettlePrintsItsOwnMoveWhenASecondIdenticalDecisionFollows(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	is.NoErr(store.Resolve(ctx, turnframe.Resolution{ID: f.unknown, Verdict: turnframe.VerdictEscalate,
		Code: turnframe.CodeNoSafeResolution, Actor: turnframe.ActorPolicy, Now: now})) // a person must decide
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
			turnframe.Decision{Verdict: turnframe.VerdictResend, Code: "operator.resend", Actor: turnframe.ActorOperator}))
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{f.unknown.String(), "resend"}, settleFlags{actor: string(turnframe.ActorOperator)})
	is.NoErr(err)
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	t.Log(out.String())
	is.True(strings.Contains(out.String(), "needs_intervention → pending by operator")) // the move this operator made
}
