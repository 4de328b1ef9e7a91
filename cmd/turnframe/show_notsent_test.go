package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// TestShowDoesNotCallAnUnsentPutBackARequeue: since baa6189 a claim
// put back unsent (CodeNotSent) raises AttemptBase, yet 'turnframe show'
// reads any AttemptBase as a requeue: a row nobody ever requeued (a
// dispatcher shut down before its send, then one real attempt) is shown
// "requeued after attempt 1", and 'turnframe outbox' calls BASE "the ones
// made before the row's last requeue". An operator reading it looks for a
// requeue (and its failure) that never happened.
func TestShowDoesNotCallAnUnsentPutBackARequeue(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(t0), ids.AttemptID(t0)
	_, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(t0), Text: "pay"},
		Admit:  []turnframe.Command{{Key: "k1", Case: "case/k1", Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	is.NoErr(err)
	_, err = store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{{Destination: "bakery"}},
	})
	is.NoErr(err)
	c, err := store.ClaimDue(ctx, t0, 1, "w1", time.Minute)
	is.NoErr(err)
	is.NoErr(turnframe.RetryClaim(ctx, store, c[0], turnframe.CodeNotSent, t0)) // shut down before its send: nothing left
	c, err = store.ClaimDue(ctx, t0, 1, "w1", time.Minute)
	is.NoErr(err)
	is.NoErr(turnframe.RetryClaim(ctx, store, c[0], "http.503", t0.Add(time.Second))) // one real attempt
	r, err := store.GetOutbox(ctx, c[0].ID)
	is.NoErr(err)
	got := attemptsText(r)
	t.Log(got)
	is.True(!strings.Contains(got, "requeued after")) // it was never requeued: the text must not say so
}
