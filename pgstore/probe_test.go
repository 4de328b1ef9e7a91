package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// The held mark is "an index of the rule, not the rule": the claim's probe
// applies turnframe's ordering rule itself, "so a mark missing where it
// belongs costs time, never order" (claimSQL). With every mark lost, a row
// must still wait while its key's head is Dispatching, OutcomeUnknown,
// NeedsIntervention or Pending again, and go once the head failed.
func TestClaimKeepsOrderWithoutHeldMarks(t *testing.T) {
	later := base.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		head  func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim)
		holds bool
	}{
		{"dispatching", func(*is.I, context.Context, turnframe.Store, turnframe.Claim) {}, true},
		{"outcome unknown", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, s, c, "", later))
		}, true},
		{"needs intervention", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, s, c, "", later))
			is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: c.ID, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: later}))
		}, true},
		{"pending again", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.RetryClaim(ctx, s, c, "busy", later.Add(time.Hour)))
		}, true},
		{"failed", func(is *is.I, ctx context.Context, s turnframe.Store, c turnframe.Claim) {
			is.NoErr(turnframe.FailClaim(ctx, s, c, "declined", later))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
			ids := turnframe.NewIDGenerator()
			msg := turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"}
			is.NoErr(enqueueRows(ctx, s, ids, "acme", "k1", base, msg, msg))
			head, err := s.ClaimDue(ctx, later, 10, "w", time.Minute)
			is.NoErr(err)
			is.Equal(len(head), 1) // the head alone
			tc.head(is, ctx, s, head[0])

			// Every held mark lost: only the probe is left to keep the order.
			_, err = s.Pool().Exec(ctx, `UPDATE outbox SET held = false`)
			is.NoErr(err)

			got, err := s.ClaimDue(ctx, later, 10, "w2", time.Minute)
			is.NoErr(err)
			if tc.holds {
				is.Equal(len(got), 0) // the successor waits for its head, mark or no mark
				return
			}
			is.Equal(len(got), 1) // the successor goes
			is.True(got[0].ID != head[0].ID)
		})
	}
}

// keepOrder: "one that starts again (a failed row requeued) holds back
// every Pending row after it, and is itself held if an earlier row is
// active". The marks are the claim's index ("a queue behind a blocked head
// is not read at all"): a requeue must leave them as an enqueue would.
func TestARequeueMarksTheRowsItHoldsBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	msg := turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"}
	is.NoErr(enqueueRows(ctx, s, ids, "acme", "k1", base, msg, msg, msg))
	held := func(key string) bool {
		var h bool
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT held FROM outbox WHERE key = $1`, key).Scan(&h))
		return h
	}
	now := base.Add(time.Minute)
	fail := func(want string) turnframe.Claim {
		got, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
		is.NoErr(err)
		is.Equal(len(got), 1)
		is.Equal(string(got[0].Key), want)
		is.NoErr(turnframe.FailClaim(ctx, s, got[0], "declined", now))
		return got[0]
	}
	first := fail("k1~1")
	second := fail("k1~2")
	is.True(!held("k1~3")) // its head failed: let go

	is.NoErr(s.Requeue(ctx, first.ID, 0, now))
	is.True(held("k1~3")) // the requeued first row holds the third back again

	is.NoErr(s.Requeue(ctx, second.ID, 0, now))
	is.True(held("k1~2")) // the first row, active again, holds the second back

	got, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(got[0].ID, first.ID) // the order holds
}
