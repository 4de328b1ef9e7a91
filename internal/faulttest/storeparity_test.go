package faulttest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The rules below are ones memstore keeps and no test held it to: each was
// found by a mutant of memstore that every other test let live. Each runs
// on sqlitestore too, the store memstore must not diverge from: an
// application tested on memstore is told what sqlitestore does. They live
// here, where both stores are imported, since neither store's own tests
// import the other.

// parityBase is the time the parity tests' writes begin at.
var parityBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// bothStores runs f once on a fresh memstore and once on a fresh sqlitestore.
func bothStores(t *testing.T, f func(t *testing.T, s turnframe.Store)) {
	t.Helper()
	t.Run("memstore", func(t *testing.T) {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"))
		if err != nil {
			t.Fatalf("open sqlitestore: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

// gapTurn is one turn of acme begun on s, and the ids to go on.
type gapTurn struct {
	s    turnframe.Store
	ids  *turnframe.IDGenerator
	turn turnframe.TurnID
	ctx  context.Context
}

func beginGapTurn(t *testing.T, s turnframe.Store) *gapTurn {
	t.Helper()
	g := &gapTurn{s: s, ids: turnframe.NewIDGenerator(), ctx: context.Background()}
	g.turn = g.ids.TurnID(parityBase)
	g.apply(t, turnframe.Write{
		Begin: &turnframe.StoredTurn{Account: "acme", ID: g.turn, Conversation: g.ids.ConversationID(parityBase), Text: "hi"},
	}, parityBase)
	return g
}

// apply writes w on g's turn of acme at now and fails the test on an error.
func (g *gapTurn) apply(t *testing.T, w turnframe.Write, now time.Time) turnframe.Applied {
	t.Helper()
	w.Account, w.Turn, w.Now = "acme", g.turn, now
	a, err := g.s.Apply(g.ctx, w)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return a
}

// A delivered turn whose approved command is being run (a resend after the
// answer went out, taken by an attempt) is unfinished: were the process to
// die under it, recovery must find the turn (turnframe.Unfinished counts
// Executing entries among the pending ones).
func TestADeliveredTurnWithAnExecutingEntryIsUnfinished(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s)
		g.apply(t, turnframe.Write{
			Admit: []turnframe.Command{{Key: "pay", Case: "payment/1", Name: "charge", NeedsApproval: true}},
			Phase: turnframe.PhasePlanned,
		}, parityBase.Add(time.Second))
		g.apply(t, turnframe.Write{Phase: turnframe.PhaseDelivered}, parityBase.Add(2*time.Second))
		g.apply(t, turnframe.Write{Settle: []turnframe.Settlement{turnframe.ApprovalSettlement("pay", true)}}, parityBase.Add(3*time.Second))
		g.apply(t, turnframe.Write{Settle: []turnframe.Settlement{{
			Key: "pay", To: turnframe.JournalExecuting, Attempt: g.ids.AttemptID(parityBase), Lease: time.Minute,
		}}}, parityBase.Add(4*time.Second))

		e, err := s.ByKey(g.ctx, "acme", "pay")
		is.NoErr(err)                                  // by key
		is.Equal(e.Status, turnframe.JournalExecuting) // the approved command runs on the delivered turn
		got, err := s.ListUnfinishedTurns(g.ctx, turnframe.RecoveryScope{}, 10)
		is.NoErr(err)                 // list unfinished
		is.Equal(len(got), 1)         // the delivered turn running its command is unfinished
		is.Equal(got[0].Turn, g.turn) // that turn
	})
}

// EventsByID returns each event once, however often its id is asked for, as
// a SQL store's "id IN (…)" does.
func TestEventsByIDReturnsEachEventOnce(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s)
		attempt := g.ids.AttemptID(parityBase)
		g.apply(t, turnframe.Write{
			Admit:  []turnframe.Command{{Key: "book", Case: "booking/1", Name: "book"}},
			Settle: []turnframe.Settlement{{Key: "book", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
		}, parityBase.Add(time.Second))
		a := g.apply(t, turnframe.Write{
			Settle: []turnframe.Settlement{{Key: "book", To: turnframe.JournalCommitted, Attempt: attempt}},
			Events: []turnframe.Event{{Case: "booking/1", Type: "booked"}, {Case: "booking/1", Type: "confirmed"}},
		}, parityBase.Add(2*time.Second))

		first, second := a.Events[0].ID, a.Events[1].ID
		got, err := s.EventsByID(g.ctx, "acme", []turnframe.EventID{second, first, second, first})
		is.NoErr(err)               // events by id
		is.Equal(len(got), 2)       // each event once, not once per time it was asked for
		is.Equal(got[0].ID, first)  // in append order
		is.Equal(got[1].ID, second) // in append order
	})
}

// A call whose context has ended does nothing, as on a SQL store: its
// transaction never begins.
func TestACallWithAnEndedContextWritesNothing(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Apply(ctx, turnframe.Write{
			Account: "acme", Turn: g.turn, Now: parityBase.Add(time.Second),
			Admit: []turnframe.Command{{Key: "book", Case: "booking/1", Name: "book"}},
		})
		is.True(errors.Is(err, context.Canceled)) // the write is refused with the context's error
		_, err = s.ByKey(g.ctx, "acme", "book")
		is.True(errors.Is(err, turnframe.ErrNotFound)) // and nothing of it was written
	})
}

// A Begin that leaves ReceivedAt zero is received at the Write's Now: a turn
// never reads back with no time of receipt.
func TestABeginWithoutReceivedAtIsReceivedAtTheWritesNow(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		ids := turnframe.NewIDGenerator()
		turn := ids.TurnID(parityBase)
		now := parityBase.Add(1500 * time.Nanosecond)
		_, err := s.Apply(context.Background(), turnframe.Write{
			Account: "acme", Turn: turn, Now: now,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(parityBase)},
		})
		is.NoErr(err) // begin
		got, err := s.LoadTurn(context.Background(), "acme", turn)
		is.NoErr(err)                                                  // load turn
		is.Equal(got.ReceivedAt, now.Truncate(time.Microsecond).UTC()) // received at the Write's Now, as stored
	})
}

// enqueueOne runs a command of g's turn and commits it with one outbox row at
// now, and returns the row.
func (g *gapTurn) enqueueOne(t *testing.T, key turnframe.IdempotencyKey, now time.Time) turnframe.OutboxEntry {
	t.Helper()
	attempt := g.ids.AttemptID(now)
	g.apply(t, turnframe.Write{
		Admit:  []turnframe.Command{{Key: key, Case: "booking/1", Name: "book"}},
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	}, now)
	a := g.apply(t, turnframe.Write{
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{{Destination: "payments", Payload: []byte("p")}},
	}, now)
	return a.Outbox[0]
}

// An outbox row's history is found under its id in either case, as ids parse
// in either case: the store files it under the id's canonical text.
func TestAnOutboxRowsHistoryIsFoundUnderItsIDInEitherCase(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s)
		row := g.enqueueOne(t, "book", parityBase.Add(time.Second))
		lower := turnframe.Subject{Kind: turnframe.SubjectOutbox, Account: "acme", Ref: strings.ToLower(row.ID.String())}
		is.True(lower.Ref != row.ID.String()) // the id's text has letters to lower

		recs, err := s.History(g.ctx, lower, 0, 10)
		is.NoErr(err)                                                                                                                                 // history under the lower-case id
		is.Equal(len(recs), 1)                                                                                                                        // the enqueue record
		is.Equal(recs[0].To, turnframe.OutboxPending.String())                                                                                        // the row enqueued
		is.NoErr(s.RecordEvidence(g.ctx, turnframe.NewEvidence(lower, "", turnframe.ActorOperator, "", "", "looked", parityBase.Add(2*time.Second)))) // evidence under the lower-case id
		recs, err = s.History(g.ctx, turnframe.OutboxSubject("acme", row.ID), 0, 10)
		is.NoErr(err)             // history under the canonical id
		is.Equal(len(recs), 2)    // the enqueue record and the evidence: one trail
		is.True(recs[1].Evidence) // the evidence, filed with the row's trail
	})
}

// Prune's cut-off is kept as every time is, to the microsecond: a row
// finished at T is not finished before T+500ns, which reads as T.
func TestPrunesCutOffIsTruncatedToTheMicrosecond(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s)
		g.enqueueOne(t, "book", parityBase.Add(time.Second))
		done := parityBase.Add(2 * time.Second)
		claims, err := s.ClaimDue(g.ctx, done, 10, "w", time.Minute)
		is.NoErr(err)                                                    // claim
		is.Equal(len(claims), 1)                                         // the row
		is.NoErr(turnframe.CompleteClaim(g.ctx, s, claims[0], "", done)) // completed at done

		n, err := s.Prune(g.ctx, done.Add(500*time.Nanosecond))
		is.NoErr(err)  // prune
		is.Equal(n, 0) // the cut-off reads as done, and the row did not finish before it
		n, err = s.Prune(g.ctx, done.Add(time.Microsecond))
		is.NoErr(err)  // prune a microsecond later
		is.Equal(n, 1) // now it did
	})
}

// A recovery scope's cut-off is kept to the microsecond too: a turn updated
// at T was not updated before T+500ns, which reads as T.
func TestUnfinishedTurnsCutOffIsTruncatedToTheMicrosecond(t *testing.T) {
	bothStores(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		g := beginGapTurn(t, s) // updated at parityBase
		got, err := s.ListUnfinishedTurns(g.ctx, turnframe.RecoveryScope{UpdatedBefore: parityBase.Add(500 * time.Nanosecond)}, 10)
		is.NoErr(err)         // list unfinished
		is.Equal(len(got), 0) // the cut-off reads as parityBase, and the turn was not updated before it
		got, err = s.ListUnfinishedTurns(g.ctx, turnframe.RecoveryScope{UpdatedBefore: parityBase.Add(time.Microsecond)}, 10)
		is.NoErr(err)         // list unfinished a microsecond later
		is.Equal(len(got), 1) // now it was
	})
}
