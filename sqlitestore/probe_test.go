package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The held mark is an index of the ordering rule, not the rule: the claim's
// probe applies the rule itself, so a mark missing where it belongs costs
// time, never order (claimSQL). With every mark cleared, a row whose
// earlier row of its key is Pending, Dispatching, OutcomeUnknown or
// NeedsIntervention is still not claimed; one behind a Failed row is.
func TestClaimKeepsOrderWithoutHeldMarks(t *testing.T) {
	later := t0.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		head  func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) // moves the claimed head on
		holds bool
	}{
		{"dispatching", func(*is.I, context.Context, turnframe.Store, turnframe.Claim) {}, true},
		{"outcome unknown", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, s, c, "", later)) // the head's send may have started
		}, true},
		{"needs intervention", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, s, c, "", later))
			is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: c.ID, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: later})) // escalated
		}, true},
		{"pending again", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.RetryClaim(ctx, s, c, "busy", later.Add(time.Hour))) // due again only later
		}, true},
		{"failed", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.FailClaim(ctx, s, c, "declined", later)) // a failed head lets the key go
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t)
			msg := turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"}
			rows := mustCommit(t, s, "acme", "k1", msg, msg).Outbox
			head := claimOne(t, s, later)
			is.Equal(head.ID, rows[0].ID) // the head goes first
			tc.head(is, ctx, s, head)

			// Every held mark lost: only the probe is left to keep the order.
			tx, err := s.BeginTx(ctx)
			is.NoErr(err)
			_, err = tx.ExecContext(ctx, `UPDATE outbox SET held = 0`)
			is.NoErr(err)
			is.NoErr(tx.Commit())

			got := claimDue(t, s, later)
			if tc.holds {
				is.Equal(len(got), 0) // the successor waits for its head, mark or no mark
				return
			}
			is.Equal(len(got), 1)           // the successor goes
			is.Equal(got[0].ID, rows[1].ID) // and it is the successor
		})
	}
}
