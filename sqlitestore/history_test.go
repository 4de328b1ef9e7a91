package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storekit"
)

// moves returns subject's history as "from>to@actor" lines, and fails the
// test unless Seq increases.
func moves(t *testing.T, s *sqlitestore.Store, subject turnframe.Subject) []string {
	t.Helper()
	recs, err := s.History(context.Background(), subject, 0, turnframe.MaxLimit)
	if err != nil {
		t.Fatalf("history of %v: %v", subject, err)
	}
	var out []string
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Fatalf("history of %v: seq %d after %d", subject, r.Seq, recs[i-1].Seq)
		}
		if r.Subject != subject {
			t.Fatalf("history of %v holds a record of %v", subject, r.Subject)
		}
		out = append(out, r.From+">"+r.To+"@"+string(r.Actor))
	}
	return out
}

// A turn's history, its entry's and its row's, each move once, in order,
// with its actor: the Write's, a worker's for a claim and its settlement.
func TestHistoryOfATurn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	prepare.Actor = "app:booking"
	_, err := s.Apply(ctx, prepare)
	is.NoErr(err)
	// The holder renews its lease: no record.
	renew := turnframe.Write{Account: "acme", Turn: prepare.Turn, Now: t0.Add(time.Millisecond),
		Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: prepare.Settle[0].Attempt, Lease: lease}}}
	_, err = s.Apply(ctx, renew)
	is.NoErr(err)
	commit.Note = "booked"
	applied, err := s.Apply(ctx, commit)
	is.NoErr(err)
	row := applied.Outbox[0]
	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, 1, "w1", lease)
	is.NoErr(err)
	is.NoErr(turnframe.CompleteClaim(ctx, s, claims[0], "ref-1", later))
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: prepare.Turn, Now: later, Phase: turnframe.PhaseDelivered})
	is.NoErr(err)

	is.Equal(moves(t, s, turnframe.TurnSubject("acme", prepare.Turn)), []string{
		">received@app:booking", "received>executing@app:booking", "executing>committed@app", "committed>delivered@app",
	})
	is.Equal(moves(t, s, turnframe.JournalSubject("acme", "k1")), []string{
		">pending@app:booking", "pending>executing@app:booking", "executing>committed@app",
	})
	is.Equal(moves(t, s, turnframe.OutboxSubject("acme", row.ID)), []string{
		">pending@app", "pending>dispatching@worker:w1", "dispatching>completed@worker:w1",
	})
	recs, err := s.History(ctx, turnframe.OutboxSubject("acme", row.ID), 0, 10)
	is.NoErr(err)
	is.Equal(recs[0].Note, "booked")     // the Write's note
	is.Equal(recs[1].Attempt, "1")       // the claim's attempt number
	is.Equal(recs[2].RemoteRef, "ref-1") // what the remote said
	is.True(recs[2].At.Equal(later))
	entry, err := s.History(ctx, turnframe.JournalSubject("acme", "k1"), 0, 10)
	is.NoErr(err)
	is.Equal(entry[1].Attempt, prepare.Settle[0].Attempt.String()) // the attempt that took it
}

// A claim and a group of settlements write their records several per
// statement, in batches of 16, 8, 4, 2 and 1; records that share their
// kind, statuses, actor and note bind those once. Whatever the path, each
// record is the one storekit.RowHistory makes, in the order made.
func TestHistoryBatches(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	const n = 23 // 16 + 4 + 2 + 1
	msgs := make([]turnframe.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: fmt.Sprintf("d%d", i)}
	}
	applied := mustCommit(t, s, "acme", "k1", msgs...)
	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, n, "w", lease)
	is.NoErr(err)
	is.Equal(len(claims), n)

	// Settlements of every kind, at different times: mixed batches.
	var batch []turnframe.OutboxSettlement
	for i, c := range claims {
		st := turnframe.OutboxSettlement{Claim: c, Now: later.Add(time.Duration(i) * time.Millisecond)}
		switch i % 4 {
		case 0:
			st.To, st.RemoteRef = turnframe.OutboxCompleted, fmt.Sprintf("ref-%d", i)
		case 1:
			st.To, st.Code, st.RetryAt = turnframe.OutboxPending, "http.503", later.Add(time.Minute)
		case 2:
			st.To, st.Code = turnframe.OutboxFailed, "declined"
		case 3:
			st.To, st.RemoteRef = turnframe.OutboxOutcomeUnknown, "maybe"
		}
		batch = append(batch, st)
	}
	results, err := s.Settle(ctx, batch)
	is.NoErr(err)
	for _, r := range results {
		is.NoErr(r)
	}

	var lastClaimSeq, lastSettleSeq int64
	for i, e := range applied.Outbox {
		recs, err := s.History(ctx, turnframe.OutboxSubject("acme", e.ID), 0, 10)
		is.NoErr(err)
		is.Equal(len(recs), 3) // enqueued, claimed, settled
		row, err := s.GetOutbox(ctx, e.ID)
		is.NoErr(err)
		claimed := row
		claimed.Status, claimed.LastCode, claimed.RemoteRef = turnframe.OutboxDispatching, "", ""
		want := storekit.RowHistory(turnframe.OutboxRecord{Status: turnframe.OutboxPending}, claimed, "worker:w", "", later)
		is.Equal(withoutSeq(recs[1]), want) // the claim's record, bound through the shared batch
		is.Equal(recs[2].To, batch[i].To.String())
		is.Equal(recs[2].Code, row.LastCode)
		is.Equal(recs[2].RemoteRef, row.RemoteRef)
		is.True(recs[2].At.Equal(batch[i].Now)) // each settlement at its own time
		is.True(recs[1].Seq > lastClaimSeq)     // the claim's records in claim order
		is.True(recs[2].Seq > lastSettleSeq)    // the settlements' in batch order
		lastClaimSeq, lastSettleSeq = recs[1].Seq, recs[2].Seq
	}
	is.True(lastClaimSeq < lastSettleSeq) // and the claim's before the settlements'
}

// withoutSeq returns r with Seq zero, for comparing with a record the root
// helpers built.
func withoutSeq(r turnframe.HistoryRecord) turnframe.HistoryRecord {
	r.Seq = 0
	return r
}

// A write that fails writes no record: a refused Write under ApplyTx's
// savepoint, a settlement that lost its claim.
func TestHistoryOfWhatFailsIsNotWritten(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	before := count(t, s, "history")

	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback()
	w := begin("acme")
	w.Admit = []turnframe.Command{{Key: "k2", Case: "booking/2", Name: "book"}}
	w.Phase = turnframe.PhaseDelivered // refused: k2 is pending
	_, err = s.ApplyTx(ctx, tx, w)
	is.True(errors.Is(err, turnframe.ErrConflict))
	is.NoErr(tx.Commit())
	is.Equal(count(t, s, "history"), before) // the turn, the entry: nothing of them

	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, 1, "w", lease)
	is.NoErr(err)
	lost := claims[0]
	lost.Worker = "another"
	results, err := s.Settle(ctx, []turnframe.OutboxSettlement{
		{Claim: lost, To: turnframe.OutboxCompleted, Now: later},
		{Claim: claims[0], To: turnframe.OutboxCompleted, Now: later},
	})
	is.NoErr(err)
	is.True(errors.Is(results[0], turnframe.ErrClaimLost))
	is.NoErr(results[1])
	is.Equal(moves(t, s, turnframe.OutboxSubject("acme", applied.Outbox[0].ID)), []string{
		">pending@app", "pending>dispatching@worker:w", "dispatching>completed@worker:w", // the lost claim's settlement left none
	})
}

// Prune deletes the history of the rows it deletes, and of no other row,
// entry or turn.
func TestPruneDeletesTheHistoryOfItsRows(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "a"}, turnframe.OutboxMessage{Destination: "b"})
	done, kept := applied.Outbox[0], applied.Outbox[1]
	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, 2, "w", lease)
	is.NoErr(err)
	is.NoErr(turnframe.CompleteClaim(ctx, s, claims[0], "", later))
	turnHistory := moves(t, s, turnframe.TurnSubject("acme", done.Turn))
	entryHistory := moves(t, s, turnframe.JournalSubject("acme", "k1"))
	keptHistory := moves(t, s, turnframe.OutboxSubject("acme", kept.ID))

	n, err := s.Prune(ctx, later.Add(time.Second))
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(len(moves(t, s, turnframe.OutboxSubject("acme", done.ID))), 0)      // gone with its row
	is.Equal(moves(t, s, turnframe.OutboxSubject("acme", kept.ID)), keptHistory) // another row's stays
	is.Equal(moves(t, s, turnframe.TurnSubject("acme", done.Turn)), turnHistory) // the turn's stays
	is.Equal(moves(t, s, turnframe.JournalSubject("acme", "k1")), entryHistory)  // the entry's stays
}

// A subject names an id in either case; a reference that is no id names
// nothing (no history, and no evidence about it).
func TestHistorySubjectRefs(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	row := applied.Outbox[0]
	lower := turnframe.Subject{Kind: turnframe.SubjectOutbox, Account: "acme", Ref: strings.ToLower(row.ID.String())}
	recs, err := s.History(ctx, lower, 0, 10)
	is.NoErr(err)
	is.Equal(len(recs), 1)                 // the enqueue, found by the id in lower case
	is.Equal(recs[0].Ref, row.ID.String()) // filed under the canonical id
	is.NoErr(s.RecordEvidence(ctx, turnframe.NewEvidence(lower, "", turnframe.ActorOperator, "", "", "looked", t0)))
	is.Equal(len(moves(t, s, turnframe.OutboxSubject("acme", row.ID))), 2)

	notAnID := turnframe.Subject{Kind: turnframe.SubjectTurn, Account: "acme", Ref: "not-an-id"}
	recs, err = s.History(ctx, notAnID, 0, 10)
	is.NoErr(err)
	is.Equal(len(recs), 0)
	err = s.RecordEvidence(ctx, turnframe.NewEvidence(notAnID, "", turnframe.ActorOperator, "", "", "looked", t0))
	is.True(errors.Is(err, turnframe.ErrNotFound))
}
