package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func TestRoundTrip(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1",
		turnframe.OutboxMessage{Destination: "payments", Payload: []byte("charge"), OrderKey: "card"},
		turnframe.OutboxMessage{Destination: "email", Payload: nil})
	is.Equal(applied.Phase, turnframe.PhaseCommitted)
	is.Equal(len(applied.Outbox), 2)
	is.Equal(applied.Outbox[0].Key, turnframe.IdempotencyKey("k1~1"))

	entries, err := s.ForTurn(ctx, "acme", applied.Outbox[0].Turn)
	is.NoErr(err)
	is.Equal(len(entries), 1)
	is.Equal(entries[0].Status, turnframe.JournalCommitted)
	is.Equal(entries[0].EventIDs, []turnframe.EventID{applied.Events[0].ID})

	evs, err := s.EventsByID(ctx, "acme", entries[0].EventIDs)
	is.NoErr(err)
	is.Equal(evs, applied.Events)

	claims, err := s.ClaimDue(ctx, t0.Add(time.Hour), 10, "w1", lease)
	is.NoErr(err)
	is.Equal(len(claims), 2)
	is.Equal(claims[0].ID, applied.Outbox[0].ID)
	is.Equal(claims[1].Payload, []byte(nil))
	is.NoErr(turnframe.CompleteClaim(ctx, s, claims[0], "ref", t0.Add(time.Hour)))
	is.NoErr(turnframe.CompleteClaim(ctx, s, claims[1], "ref", t0.Add(time.Hour)))
	rec, err := s.GetOutbox(ctx, claims[0].ID)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxCompleted)
	is.Equal(rec.FinishedAt, t0.Add(time.Hour))
	n, err := s.Prune(ctx, t0.Add(2*time.Hour))
	is.NoErr(err)
	is.Equal(n, 2)
}
