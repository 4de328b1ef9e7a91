package sqlitestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// Every statement of the write path is prepared when the store opens: a
// whole turn, an adoption, an abandon, an advance, a claim, an extension,
// every settlement, an escalation and a resolve, requeue, release, expiry,
// prune, evidence and ApplyTx (kept and undone) run none from its text,
// the history each writes included.
func TestWritePathRunsOnlyPreparedStatements(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	step := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// A turn: begin, admit, start, readmit, commit with events and ordered
	// and unordered outbox rows, deliver with a replay record.
	prepare, commit := commitWrites("acme", "k1",
		turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"},
		turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"},
		turnframe.OutboxMessage{Destination: "payments", OrderKey: "card-1"},
		turnframe.OutboxMessage{Destination: "mail"},
		turnframe.OutboxMessage{Destination: "mail"},
		turnframe.OutboxMessage{Destination: "mail"},
	)
	_, err := s.Apply(ctx, prepare)
	step("prepare", err)
	readmit := turnframe.Write{Account: "acme", Turn: prepare.Turn, Now: t0.Add(time.Millisecond), Admit: prepare.Admit,
		Expect: map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": 0}}
	_, err = s.Apply(ctx, readmit)
	step("readmit", err)
	_, err = s.Apply(ctx, commit)
	step("commit", err)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: prepare.Turn, Now: t0.Add(2 * time.Second),
		Phase: turnframe.PhaseDelivered, Replay: &turnframe.ReplayRecord{}})
	step("deliver", err)

	// A command admitted by a turn that was abandoned, adopted by the next
	// turn, which then advances.
	abandoned := begin("acme")
	abandoned.Admit = []turnframe.Command{{Key: "a1", Case: "booking/2", Name: "book"}}
	_, err = s.Apply(ctx, abandoned)
	step("admit", err)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: abandoned.Turn, Now: t0.Add(time.Second), Phase: turnframe.PhaseAbandoned})
	step("abandon", err)
	adopting := begin("acme")
	adopting.Now = t0.Add(2 * time.Second)
	adopting.Admit = abandoned.Admit
	applied, err := s.Apply(ctx, adopting)
	step("adopt", err)
	is.Equal(applied.Admitted[0].Turn, adopting.Turn) // adopted
	applied, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: adopting.Turn, Now: t0.Add(3 * time.Second), Advance: turnframe.PhaseInterpreted})
	step("advance", err)
	is.Equal(applied.Phase, turnframe.PhaseInterpreted)

	// Claims and every settlement: the ordered head and the three
	// unordered rows are due.
	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, 16, "w", lease)
	step("claim", err)
	is.Equal(len(claims), 4)
	head := claims[0]
	step("unknown", turnframe.MarkClaimUnknown(ctx, s, head, "ref", later))
	escalate := turnframe.Resolution{ID: head.ID, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: later}
	step("escalate", s.Resolve(ctx, escalate))
	fail := turnframe.Resolution{ID: head.ID, Verdict: turnframe.VerdictFailed, Code: "declined", Now: later}
	step("resolve", s.Resolve(ctx, fail))              // lets the next row go
	step("requeue", s.Requeue(ctx, head.ID, 0, later)) // holds the key again
	results, err := s.Settle(ctx, []turnframe.OutboxSettlement{
		{Claim: claims[1], To: turnframe.OutboxCompleted, RemoteRef: "r", Now: later},
		{Claim: claims[2], To: turnframe.OutboxPending, Code: "busy", RetryAt: later, Now: later},
		{Claim: claims[3], To: turnframe.OutboxFailed, Code: "gone", Now: later},
		{Claim: claims[3], To: turnframe.OutboxFailed, Code: "gone", Now: later}, // settled twice: lost
	})
	step("settle", err)
	is.NoErr(results[0])
	is.NoErr(results[1])
	is.NoErr(results[2])
	is.True(errors.Is(results[3], turnframe.ErrClaimLost))

	again, err := s.ClaimDue(ctx, later, 16, "w", lease)
	step("claim again", err)
	is.True(len(again) > 1)
	extended, err := s.ExtendClaims(ctx, again, later.Add(time.Second), lease)
	step("extend", err)
	is.NoErr(extended[0])
	step("release one", s.ReleaseClaim(ctx, again[0].ID, 0, later.Add(time.Second)))
	expired, err := s.ExpireClaims(ctx, later.Add(time.Second+lease))
	step("expire", err)
	is.Equal(len(expired), len(again)-1)
	pruned, err := s.Prune(ctx, later.Add(time.Minute))
	step("prune", err)
	is.Equal(pruned, 2)

	// Evidence about each kind of subject.
	for _, subject := range []turnframe.Subject{
		turnframe.JournalSubject("acme", "k1"), turnframe.OutboxSubject("acme", head.ID), turnframe.TurnSubject("acme", prepare.Turn),
	} {
		step("evidence", s.RecordEvidence(ctx, turnframe.NewEvidence(subject, "", turnframe.ActorOperator, "", "", "looked", later)))
	}

	// ApplyTx: a Write kept, and a refused one undone.
	prepare2, commit2 := commitWrites("acme", "k2", turnframe.OutboxMessage{Destination: "payments"})
	tx, err := s.BeginTx(ctx)
	step("begin tx", err)
	defer tx.Rollback()
	_, err = s.ApplyTx(ctx, tx, prepare2)
	step("apply tx", err)
	_, err = s.ApplyTx(ctx, tx, prepare2) // its turn exists: refused, undone
	is.True(errors.Is(err, turnframe.ErrConflict))
	_, err = s.ApplyTx(ctx, tx, commit2)
	step("apply tx commit", err)
	step("commit tx", tx.Commit())

	is.Equal(sqlitestore.UnpreparedStatements(s), int64(0))
}

// Every read with a fixed text runs a statement prepared when the store
// opened: the reads a turn makes (the turn, its entries, a case's revision,
// the replay record), and the other point reads and histories. A listing
// whose text depends on its filter runs from its text, and is counted.
func TestReadPathRunsPreparedStatements(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	prepare, commit := commitWrites("acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	_, err := s.Apply(ctx, prepare)
	is.NoErr(err) // prepare
	applied, err := s.Apply(ctx, commit)
	is.NoErr(err) // commit
	turn, key := prepare.Turn, turnframe.IdempotencyKey("k1")
	c := applied.Settled[0].Case
	reads := []struct {
		name string
		read func() error
	}{
		{"load turn", func() error { _, err := s.LoadTurn(ctx, "acme", turn); return err }},
		{"turn phase", func() error { _, err := s.TurnPhase(ctx, "acme", turn); return err }},
		{"for turn", func() error { _, err := s.ForTurn(ctx, "acme", turn); return err }},
		{"by key", func() error { _, err := s.ByKey(ctx, "acme", key); return err }},
		{"case revision", func() error { _, err := s.CaseRevision(ctx, "acme", c); return err }},
		{"events since", func() error { _, err := s.EventsSince(ctx, "acme", c, 0, 10); return err }},
		{"events by id", func() error { _, err := s.EventsByID(ctx, "acme", applied.Settled[0].EventIDs); return err }},
		{"history", func() error {
			_, err := s.History(ctx, turnframe.JournalSubject("acme", key), 0, 10)
			return err
		}},
		{"outbox row", func() error { _, err := s.GetOutbox(ctx, applied.Outbox[0].ID); return err }},
		{"unfinished turns", func() error {
			_, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: "acme", UpdatedBefore: t0.Add(time.Hour)}, 10)
			return err
		}},
		{"replay (none yet)", func() error {
			if _, err := s.Replay(ctx, "acme", turn); !errors.Is(err, turnframe.ErrNotFound) {
				return err
			}
			return nil
		}},
	}
	for _, r := range reads {
		if err := r.read(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	is.Equal(sqlitestore.UnpreparedReads(s), int64(0)) // every fixed read ran prepared
	_, err = s.ListOutbox(ctx, turnframe.OutboxFilter{Account: "acme", Limit: 10})
	is.NoErr(err)
	is.Equal(sqlitestore.UnpreparedReads(s), int64(1)) // a listing runs from its text, and the count sees it
}

// ApplyTx was documented to take a transaction of this Store, but never
// checked it. A transaction of another store still takes the Write, as it
// did before the statements were prepared.
func TestApplyTxOfAnotherStoreRunsFromText(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, b := mustOpen(t), mustOpen(t)
	tx, err := b.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback()
	w := begin("acme")
	_, err = a.ApplyTx(ctx, tx, w)
	is.NoErr(err)
	is.NoErr(tx.Commit())
	_, err = b.LoadTurn(ctx, "acme", w.Turn)
	is.NoErr(err)
	_, err = a.LoadTurn(ctx, "acme", w.Turn)
	is.True(errors.Is(err, turnframe.ErrNotFound))
}
