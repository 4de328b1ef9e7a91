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

// TestSettlePrintsItsOwnMove: 'turnframe settle ID resend' prints the move
// the operator's decision made, as its history record says, whatever lands
// on the row between the write and the read back:
//   - a live dispatcher claims the row and the remote answers 503: the
//     line is the operator's move with the code it set, not the send's;
//   - the row is sent again, goes unknown, and a second person under the
//     same default actor fails it: not the second person's move;
//   - the row needed intervention, and the second person makes the same
//     decision (resend) from the unknown outcome of the next send: the
//     first is told its own move, from needs_intervention.
func TestSettlePrintsItsOwnMove(t *testing.T) {
	type race func(is *is.I, ctx context.Context, store turnframe.Store, id turnframe.OutboxID, now time.Time)
	sendAgain := func(end func(ctx context.Context, store turnframe.Store, c turnframe.Claim, now time.Time) error) race {
		return func(is *is.I, ctx context.Context, store turnframe.Store, id turnframe.OutboxID, now time.Time) {
			claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
			is.NoErr(err)
			for _, c := range claims {
				if c.ID == id {
					is.NoErr(end(ctx, store, c, now))
				}
			}
		}
	}
	secondPerson := func(v turnframe.Verdict, code string) race {
		return func(is *is.I, ctx context.Context, store turnframe.Store, id turnframe.OutboxID, now time.Time) {
			sendAgain(func(ctx context.Context, store turnframe.Store, c turnframe.Claim, now time.Time) error {
				return turnframe.MarkClaimUnknown(ctx, store, c, "", now)
			})(is, ctx, store, id, now)
			second := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return now }))
			is.NoErr(second.Settle(ctx, turnframe.OutboxSubject(fixtureAccount, id),
				turnframe.Decision{Verdict: v, Code: code, Actor: turnframe.ActorOperator}))
		}
	}
	cases := []struct {
		name     string
		escalate bool // the row needs intervention before the settle
		during   race
		want     string
		notWant  string
	}{
		{"NotALaterSendsCode", false, sendAgain(func(ctx context.Context, store turnframe.Store, c turnframe.Claim, now time.Time) error {
			return turnframe.RetryClaim(ctx, store, c, "http.503", now.Add(time.Minute))
		}), "outcome_unknown → pending by operator (code operator.resend)", "http.503"},
		{"NotAnotherOperatorsUnderTheSameActor", false, secondPerson(turnframe.VerdictFailed, "operator.failed"),
			"outcome_unknown → pending by operator (code operator.resend)", "failed"},
		{"NotASecondIdenticalDecisionThatFollows", true, secondPerson(turnframe.VerdictResend, "operator.resend"),
			"needs_intervention → pending by operator", "outcome_unknown → pending"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := mustFixture(t)
			store := openFixture(t, f)
			ctx := context.Background()
			now := f.t0.Add(25 * time.Hour)
			if tc.escalate {
				is.NoErr(store.Resolve(ctx, turnframe.Resolution{ID: f.unknown, Verdict: turnframe.VerdictEscalate,
					Code: turnframe.CodeNoSafeResolution, Actor: turnframe.ActorPolicy, Now: now})) // a person must decide
			}
			racing := &settleReadBack{opStore: sqliteOps{store}, during: func() { tc.during(is, ctx, store, f.unknown, now) }}
			var out strings.Builder
			e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
			rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
			req, err := parseSettle([]string{f.unknown.String(), "resend"}, settleFlags{actor: string(turnframe.ActorOperator)})
			is.NoErr(err)
			is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
			t.Log(out.String())
			is.True(strings.Contains(out.String(), tc.want))     // the move this operator made, with its code
			is.True(!strings.Contains(out.String(), tc.notWant)) // not one made since
		})
	}
}
