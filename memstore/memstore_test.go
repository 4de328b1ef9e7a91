package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

func TestSmoke(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()
	ids := turnframe.NewIDGenerator()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	turn := ids.TurnID(now)
	_, err := s.Apply(ctx, turnframe.Write{Account: "a", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "a", ID: turn, Conversation: ids.ConversationID(now)},
		Admit: []turnframe.Command{{Key: "k", Case: "c", Name: "n"}}, Phase: turnframe.PhasePlanned})
	is.NoErr(err) // begin
	att := ids.AttemptID(now)
	_, err = s.Apply(ctx, turnframe.Write{Account: "a", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "k", To: turnframe.JournalExecuting, Attempt: att}}})
	is.NoErr(err) // execute
	ap, err := s.Apply(ctx, turnframe.Write{Account: "a", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "k", To: turnframe.JournalCommitted, Attempt: att}},
		Events: []turnframe.Event{{Case: "c", Type: "t"}},
		Outbox: []turnframe.OutboxMessage{{Destination: "d"}, {Destination: "d", OrderKey: "o"}}, Phase: turnframe.PhaseCommitted})
	is.NoErr(err) // commit
	is.Equal(ap.Outbox[1].Key, turnframe.IdempotencyKey("k/2"))
	cl, err := s.ClaimDue(ctx, now, 10, "w")
	is.NoErr(err)
	is.Equal(len(cl), 2)
	is.NoErr(s.Complete(ctx, cl[0], "r", now))
	is.True(errors.Is(s.Complete(ctx, cl[0], "r", now), turnframe.ErrClaimLost))
}
