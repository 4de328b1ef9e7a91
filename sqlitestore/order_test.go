package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// inClaimIndex counts the rows a claim can read: Pending and not held.
func inClaimIndex(t *testing.T, s *sqlitestore.Store) int {
	t.Helper()
	var n int
	err := s.ReadDB().QueryRowContext(context.Background(),
		`SELECT count(*) FROM outbox INDEXED BY outbox_due WHERE status = 'pending' AND held = 0`).Scan(&n)
	if err != nil {
		t.Fatalf("count due index: %v", err)
	}
	return n
}

// A queue behind a blocked head stays out of the claim's index, so its
// length costs a claim nothing; each row enters the index when the row
// before it stops holding the key, and leaves it again if a failed row
// before it is requeued.
func TestHeldRowsStayOutOfTheClaimIndex(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	msgs := make([]turnframe.OutboxMessage, 5)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"}
	}
	mustCommit(t, s, "acme", "k1", msgs...)
	is.Equal(inClaimIndex(t, s), 1) // the head alone

	later := t0.Add(time.Hour)
	head := claimOne(t, s, later)
	is.Equal(inClaimIndex(t, s), 0) // the head is dispatching; the rest wait
	is.NoErr(turnframe.MarkClaimUnknown(ctx, s, head, "", later))
	is.Equal(len(claimDue(t, s, later)), 0) // an unknown head blocks the key (I15)
	is.Equal(inClaimIndex(t, s), 0)         // and its queue is not read

	is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: head.ID, Verdict: turnframe.VerdictFailed, Code: "declined", Now: later}))
	is.Equal(inClaimIndex(t, s), 1) // the next row is let go
	second := claimOne(t, s, later)
	is.Equal(second.Key, turnframe.IdempotencyKey("k1~2"))
	is.NoErr(turnframe.CompleteClaim(ctx, s, second, "ref", later))
	is.Equal(inClaimIndex(t, s), 1) // and the one after it

	is.NoErr(s.Requeue(ctx, head.ID, 0, later))
	is.Equal(inClaimIndex(t, s), 1) // the requeued head holds the key again
	again := claimOne(t, s, later)
	is.Equal(again.ID, head.ID) // it goes first
}

// claimDue claims every row due at now, at most 16.
func claimDue(t *testing.T, s *sqlitestore.Store, now time.Time) []turnframe.Claim {
	t.Helper()
	claims, err := s.ClaimDue(context.Background(), now, 16, "w", lease)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return claims
}

// claimOne claims exactly one row due at now.
func claimOne(t *testing.T, s *sqlitestore.Store, now time.Time) turnframe.Claim {
	t.Helper()
	claims := claimDue(t, s, now)
	if len(claims) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(claims))
	}
	return claims[0]
}
