package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A release at schema 1 admitted command keys that today's rule refuses: a
// '~' (reserved for row keys since schema 2) or white space at an end.
// The file keeps them, and every call that addresses an admitted command
// takes them, so each such command can still run, be reconciled and be
// settled; only admitting one anew (a Plan naming it) is refused.
func TestAVersion1FilesLegacyKeysStayMovable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	f := newV1Fixture()
	executing := f.turns[1] // PhaseExecuting
	legacy := func(key turnframe.IdempotencyKey, status turnframe.JournalStatus) turnframe.JournalEntry {
		e := turnframe.JournalEntry{Account: "acme", Turn: executing.ID, Status: status,
			Command:    turnframe.Command{Key: key, Case: "order/42", Name: "book", Payload: []byte(`{}`)},
			AdmittedAt: t0, UpdatedAt: t0.Add(time.Second)}
		if status == turnframe.JournalOutcomeUnknown {
			e.Attempt, e.Attempts, e.RemoteRef = ids.AttemptID(t0), 1, "ref-42"
		}
		return e
	}
	f.entries = append(f.entries, legacy("order~42", turnframe.JournalPending), legacy("ship~42", turnframe.JournalOutcomeUnknown),
		legacy("pay-42 ", turnframe.JournalPending))
	db := createAtVersion(t, path, 1)
	f.write(t, db)
	is.New(t).NoErr(db.Close())
	s := mustOpenPath(t, path)
	now := t0.Add(time.Hour)
	clock := func() time.Time { return now }
	rt := turnframe.New(s, turnframe.WithClock(clock))
	rec := turnframe.NewRecovery(s, turnframe.WithClock(clock))

	t.Run("ByKeyReadsThem", func(t *testing.T) {
		is := is.New(t)
		for _, key := range []turnframe.IdempotencyKey{"order~42", "ship~42", "pay-42 "} {
			e, err := s.ByKey(ctx, "acme", key)
			is.NoErr(err) // an admitted key is addressed as stored
			is.Equal(e.Key, key)
		}
	})
	t.Run("TheirPendingCommandsRunOnceAndCommit", func(t *testing.T) {
		is := is.New(t)
		calls := map[turnframe.IdempotencyKey]int{}
		_, err := rt.Execute(ctx, "acme", executing.ID, turnframe.HandlerFunc(func(_ context.Context, c turnframe.Call) turnframe.Outcome {
			calls[c.Command.Key]++
			return turnframe.Commit(nil)
		}))
		is.NoErr(err)
		is.Equal(calls["order~42"], 1)
		is.Equal(calls["pay-42 "], 1)
		for _, key := range []turnframe.IdempotencyKey{"order~42", "pay-42 "} {
			e, err := s.ByKey(ctx, "acme", key)
			is.NoErr(err)
			is.Equal(e.Status, turnframe.JournalCommitted) // its commit landed
		}
	})
	t.Run("AnUnknownOneIsSettled", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(rec.Settle(ctx, turnframe.JournalSubject("acme", "ship~42"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator, Note: "checked by hand"}))
		e, err := s.ByKey(ctx, "acme", "ship~42")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalCommitted)
	})
	t.Run("ANewAdmissionOfOneIsInvalid", func(t *testing.T) {
		is := is.New(t)
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book order 42 again")
		is.NoErr(err)
		_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "order~42", Case: "order/42", Name: "book"}}})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // today's rule for a key admitted anew
	})
}

// A command a schema-1 release admitted under "pay~1" runs today and
// enqueues its one row as "pay~1~1": its own key would be the one today's
// command "pay" gives the first of two rows. Both commit, each row under a
// key of its own.
func TestALegacyTildeKeysRowsNeverTakeANewCommandsRowKey(t *testing.T) {
	ctx := context.Background()
	is := is.New(t)
	var err error
	path := filepath.Join(t.TempDir(), "v1.db")
	f := newV1Fixture()
	executing := f.turns[1] // PhaseExecuting
	f.entries = append(f.entries, turnframe.JournalEntry{Account: "acme", Turn: executing.ID, Status: turnframe.JournalPending,
		Command:    turnframe.Command{Key: "pay~1", Case: "order/42", Name: "pay", Payload: []byte(`{}`)},
		AdmittedAt: t0, UpdatedAt: t0.Add(time.Second)})
	db := createAtVersion(t, path, 1)
	f.write(t, db)
	is.NoErr(db.Close())
	s := mustOpenPath(t, path)
	now := t0.Add(time.Hour)
	rt := turnframe.New(s, turnframe.WithClock(func() time.Time { return now }))

	msg := turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{}`)}
	// The legacy command runs and commits one message, its row keyed "pay~1~1".
	_, err = rt.Execute(ctx, "acme", executing.ID, turnframe.HandlerFunc(func(_ context.Context, c turnframe.Call) turnframe.Outcome {
		if c.Command.Key == "pay~1" {
			return turnframe.Commit(nil, msg)
		}
		return turnframe.Commit(nil)
	}))
	is.NoErr(err)
	legacy, err := s.ByKey(ctx, "acme", "pay~1")
	is.NoErr(err)
	is.Equal(legacy.Status, turnframe.JournalCommitted)
	rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Account: "acme", Limit: 100})
	is.NoErr(err)
	is.Equal(rows[len(rows)-1].Key, turnframe.IdempotencyKey("pay~1~1")) // the numbered form, always

	// Today's command "pay" (a valid key) is admitted in a new turn and commits two messages.
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay order 42")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "pay", Case: "order/43", Name: "pay"}}})
	is.NoErr(err)
	_, err = rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(_ context.Context, c turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, msg, msg)
	}))
	e, err2 := s.ByKey(ctx, "acme", "pay")
	is.NoErr(err2)
	is.NoErr(err)                                  // a command admitted under today's rule commits
	is.Equal(e.Status, turnframe.JournalCommitted) // its settlement lands
}
