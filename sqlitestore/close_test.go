package sqlitestore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// After Close every method returns ErrClosed, whatever its input.
func TestClosed(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	row := applied.Outbox[0]
	claim := turnframe.Claim{OutboxEntry: row, Worker: "w"}
	claim.Attempts = 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Close", s.Close},
		{"Apply", func() error { _, err := s.Apply(ctx, begin("acme")); return err }},
		{"BeginTx", func() error { _, err := s.BeginTx(ctx); return err }},
		{"TurnPhase", func() error { _, err := s.TurnPhase(ctx, "acme", row.Turn); return err }},
		{"LoadTurn", func() error { _, err := s.LoadTurn(ctx, "acme", row.Turn); return err }},
		{"ListUnfinishedTurns", func() error { _, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 1); return err }},
		{"ForTurn", func() error { _, err := s.ForTurn(ctx, "acme", row.Turn); return err }},
		{"ByKey", func() error { _, err := s.ByKey(ctx, "acme", "k1"); return err }},
		{"EventsByID", func() error { _, err := s.EventsByID(ctx, "acme", nil); return err }},
		{"EventsSince", func() error { _, err := s.EventsSince(ctx, "acme", "booking/1", 0, 1); return err }},
		{"CaseRevision", func() error { _, err := s.CaseRevision(ctx, "acme", "booking/1"); return err }},
		{"Replay", func() error { _, err := s.Replay(ctx, "acme", row.Turn); return err }},
		{"ClaimDue", func() error { _, err := s.ClaimDue(ctx, t0, 1, "w"); return err }},
		{"Complete", func() error { return s.Complete(ctx, claim, "", t0) }},
		{"Retry", func() error { return s.Retry(ctx, claim, "", t0) }},
		{"Fail", func() error { return s.Fail(ctx, claim, "", t0) }},
		{"MarkUnknown", func() error { return s.MarkUnknown(ctx, claim, "", t0) }},
		{"Settle", func() error { _, err := s.Settle(ctx, nil); return err }},
		{"Resolve", func() error { return s.Resolve(ctx, row.ID, turnframe.VerdictCompleted, "", t0) }},
		{"Requeue", func() error { return s.Requeue(ctx, row.ID, t0) }},
		{"ReleaseExpiredClaims", func() error { _, err := s.ReleaseExpiredClaims(ctx, t0); return err }},
		{"GetOutbox", func() error { _, err := s.GetOutbox(ctx, row.ID); return err }},
		{"ListOutbox", func() error { _, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1}); return err }},
		{"Prune", func() error { _, err := s.Prune(ctx, t0); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(c.call(), turnframe.ErrClosed))
		})
	}
}
