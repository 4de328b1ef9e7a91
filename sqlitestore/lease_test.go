package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A lease is now plus a duration that need not be whole microseconds; the
// store keeps it, like every time, to the microsecond, and what a call
// returns is what a later read returns.
func TestLeasesKeepToTheMicrosecond(t *testing.T) {
	const odd = time.Minute + 1500*time.Nanosecond // 60.0000015 s
	want := t0.Add(time.Hour).Add(odd).Truncate(time.Microsecond)
	tests := []struct {
		name string
		run  func(t *testing.T, s turnframe.Store) (returned, stored time.Time)
	}{
		{name: "Claim", run: func(t *testing.T, s turnframe.Store) (time.Time, time.Time) {
			is := is.New(t)
			ctx := context.Background()
			mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
			claims, err := s.ClaimDue(ctx, t0.Add(time.Hour), 1, "w", odd)
			is.NoErr(err)
			row, err := s.GetOutbox(ctx, claims[0].ID)
			is.NoErr(err)
			return claims[0].LeaseUntil, row.LeaseUntil
		}},
		{name: "Extend", run: func(t *testing.T, s turnframe.Store) (time.Time, time.Time) {
			is := is.New(t)
			ctx := context.Background()
			mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
			claims, err := s.ClaimDue(ctx, t0.Add(time.Minute), 1, "w", time.Minute)
			is.NoErr(err)
			results, err := s.ExtendClaims(ctx, claims, t0.Add(time.Hour), odd)
			is.NoErr(err)
			is.NoErr(results[0])
			row, err := s.GetOutbox(ctx, claims[0].ID)
			is.NoErr(err)
			return row.LeaseUntil, row.LeaseUntil // ExtendClaims returns no time
		}},
		{name: "JournalTake", run: func(t *testing.T, s turnframe.Store) (time.Time, time.Time) {
			is := is.New(t)
			ctx := context.Background()
			w := begin("acme")
			w.Now = t0.Add(time.Hour)
			w.Admit = []turnframe.Command{{Key: "k1", Case: "booking/1", Name: "book"}}
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: ids.AttemptID(t0), Lease: odd}}
			applied, err := s.Apply(ctx, w)
			is.NoErr(err)
			e, err := s.ByKey(ctx, "acme", "k1")
			is.NoErr(err)
			is.Equal(e, applied.Settled[0]) // the whole entry reads back as Apply returned it
			return applied.Settled[0].LeaseUntil, e.LeaseUntil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			returned, stored := tc.run(t, mustOpen(t))
			is.Equal(returned, want) // truncated to the microsecond
			is.Equal(stored, want)   // and read back as returned
		})
	}
}
