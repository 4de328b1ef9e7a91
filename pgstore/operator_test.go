package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// operatorTurn writes one turn of account that commits key and enqueues
// msgs at now, and returns the turn and its rows' ids, in enqueue order.
func operatorTurn(t *testing.T, s *pgstore.Store, ids *turnframe.IDGenerator, account turnframe.AccountID, key turnframe.IdempotencyKey,
	now time.Time, msgs ...turnframe.OutboxMessage) (turnframe.TurnID, []turnframe.OutboxID) {
	t.Helper()
	ctx := context.Background()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	if _, err := s.Apply(ctx, turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: account, ID: turn, Conversation: ids.ConversationID(now), Text: "send"},
		Admit:  []turnframe.Command{{Key: key, Case: turnframe.CaseKey("case-" + key), Name: "send"}},
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	}); err != nil {
		t.Fatalf("begin: %v", err)
	}
	applied, err := s.Apply(ctx, turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: msgs,
	})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	var rows []turnframe.OutboxID
	for _, e := range applied.Outbox {
		rows = append(rows, e.ID)
	}
	return turn, rows
}

// The operator reads report what the Store's own calls see: counts per
// status, what a claim would take (held rows apart), ended leases, entries
// by status, every turn, a turn's account and rows, and rows per
// destination; bad input is ErrInvalid.
func TestOperatorReads(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	turn, rows := operatorTurn(t, s, ids, "acme", "k1", now,
		turnframe.OutboxMessage{Destination: "payments", OrderKey: "o"},
		turnframe.OutboxMessage{Destination: "payments", OrderKey: "o"},
		turnframe.OutboxMessage{Destination: "mail"})

	due, err := s.DueAt(ctx, now)
	is.NoErr(err)
	is.Equal(due.Rows, 2)               // the head of key o, and the mail
	is.Equal(due.Held, 1)               // the second row of key o waits for the first
	is.Equal(due.Oldest, rows[0])       // claim order: due time, then enqueue order
	is.True(due.OldestDueAt.Equal(now)) // its due time, as written
	before, err := s.DueAt(ctx, now.Add(-time.Second))
	is.NoErr(err)
	is.Equal(before, pgstore.Due{}) // nothing was due before it was enqueued

	claims, err := s.ClaimDue(ctx, now, 1, "w1", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1) // the oldest due row
	ended, n, err := s.EndedLeases(ctx, now, 10)
	is.NoErr(err)
	is.Equal(n, 0) // the lease runs
	is.Equal(len(ended), 0)
	ended, n, err = s.EndedLeases(ctx, now.Add(2*time.Minute), 10)
	is.NoErr(err)
	is.Equal(n, 1)                                 // the lease ended
	is.Equal(ended, []turnframe.OutboxID{rows[0]}) // the claimed row

	c, err := s.Counts(ctx)
	is.NoErr(err)
	is.Equal(c.Outbox, map[turnframe.OutboxStatus]int{turnframe.OutboxPending: 2, turnframe.OutboxDispatching: 1})
	is.Equal(c.Journal, map[turnframe.JournalStatus]int{turnframe.JournalCommitted: 1})
	phase, err := s.TurnPhase(ctx, "acme", turn)
	is.NoErr(err)
	is.Equal(c.Turns, map[turnframe.TurnPhase]int{phase.Phase: 1}) // the one turn

	refs, n, err := s.EntriesIn(ctx, turnframe.JournalCommitted, 10)
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(refs, []pgstore.EntryRef{{Account: "acme", Key: "k1"}})
	refs, n, err = s.EntriesIn(ctx, turnframe.JournalOutcomeUnknown, 10)
	is.NoErr(err)
	is.Equal(n, 0)         // none unknown
	is.Equal(len(refs), 0) // an empty list

	turns, err := s.ListTurns(ctx, "", turnframe.TurnID{}, 10)
	is.NoErr(err)
	is.Equal(len(turns), 1)       // every turn, finished or not
	is.Equal(turns[0].Turn, turn) // this one
	is.Equal(turns[0].Account, turnframe.AccountID("acme"))
	turns, err = s.ListTurns(ctx, "other", turnframe.TurnID{}, 10)
	is.NoErr(err)
	is.Equal(len(turns), 0) // another account's
	turns, err = s.ListTurns(ctx, "", turn, 10)
	is.NoErr(err)
	is.Equal(len(turns), 0) // none after the last

	acct, err := s.TurnAccount(ctx, turn)
	is.NoErr(err)
	is.Equal(acct, turnframe.AccountID("acme"))
	_, err = s.TurnAccount(ctx, ids.TurnID(now))
	is.True(errors.Is(err, turnframe.ErrNotFound)) // no such turn
	got, err := s.TurnOutbox(ctx, turn, turnframe.OutboxID{}, 10)
	is.NoErr(err)
	is.Equal(got, rows) // the turn's rows in enqueue order
	got, err = s.TurnOutbox(ctx, turn, rows[0], 10)
	is.NoErr(err)
	is.Equal(got, rows[1:]) // after a row: the rows enqueued after it

	dests, err := s.DestinationCounts(ctx, 10)
	is.NoErr(err)
	is.Equal(dests, []pgstore.DestinationCount{
		{Destination: "mail", Status: turnframe.OutboxPending, Rows: 1},
		{Destination: "payments", Status: turnframe.OutboxDispatching, Rows: 1},
		{Destination: "payments", Status: turnframe.OutboxPending, Rows: 1},
	})
	dests, err = s.DestinationCounts(ctx, 1)
	is.NoErr(err)
	is.Equal(len(dests), 1) // the first destination only

	t.Run("BadInput", func(t *testing.T) {
		is := is.New(t)
		for name, err := range map[string]error{
			"due zero time":      func() error { _, err := s.DueAt(ctx, time.Time{}); return err }(),
			"ended leases limit": func() error { _, _, err := s.EndedLeases(ctx, now, 0); return err }(),
			"entries limit":      func() error { _, _, err := s.EntriesIn(ctx, turnframe.JournalCommitted, 0); return err }(),
			"list turns account": func() error { _, err := s.ListTurns(ctx, " bad\x00", turnframe.TurnID{}, 1); return err }(),
			"turn account zero":  func() error { _, err := s.TurnAccount(ctx, turnframe.TurnID{}); return err }(),
			"turn outbox limit": func() error {
				_, err := s.TurnOutbox(ctx, turn, turnframe.OutboxID{}, turnframe.MaxLimit+1)
				return err
			}(),
			"destinations n": func() error { _, err := s.DestinationCounts(ctx, 0); return err }(),
		} {
			is.True(errors.Is(err, turnframe.ErrInvalid)) // name
			_ = name
		}
	})
}

// On the database's clock the operator reads take the caller's present and
// return times in its frame: a row enqueued by a host an hour ahead is due
// for it and for a host an hour behind, and each reads its due time on its
// own clock; the row's lease, running, has ended for neither.
func TestOperatorReadsInTheCallersFrame(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	ahead, behind := skewedHosts(t, pgstore.DatabaseClock)
	now := ahead.now()
	_, rows := operatorTurn(t, ahead.store, turnframe.NewIDGenerator(), "acme", "k1", now, turnframe.OutboxMessage{Destination: "mail"})

	due, err := ahead.store.DueAt(ctx, ahead.now())
	is.NoErr(err)
	is.Equal(due.Rows, 1)                                 // due for the host that enqueued it
	is.Equal(due.Oldest, rows[0])                         // the row
	is.True(due.OldestDueAt.Sub(now).Abs() < time.Minute) // on its clock
	due, err = behind.store.DueAt(ctx, behind.now())
	is.NoErr(err)
	is.Equal(due.Rows, 1)                                                   // due for the host behind too
	is.True(due.OldestDueAt.Sub(now.Add(-2*time.Hour)).Abs() < time.Minute) // on its own clock, two hours earlier

	_, err = ahead.store.ClaimDue(ctx, ahead.now(), 1, "w1", time.Minute)
	is.NoErr(err)
	_, n, err := behind.store.EndedLeases(ctx, behind.now(), 10)
	is.NoErr(err)
	is.Equal(n, 0) // the lease runs on the database's clock, whatever the host's
}

// WithExisting opens a database at this build's schema and changes
// nothing; it refuses one without the schema (ErrNotFound) and creates
// nothing there.
func TestWithExisting(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	_, err := pgstore.Open(ctx, url, pgstore.WithExisting())
	var se *pgstore.SchemaError
	is.True(errors.As(err, &se))                   // refused
	is.Equal(se.Found, int64(0))                   // no schema
	is.True(errors.Is(err, turnframe.ErrNotFound)) // missing is not found
	migrated := mustOpenURL(t, url)                // the application's Open migrates
	v, err := pgstore.DatabaseVersion(ctx, migrated.Pool())
	is.NoErr(err)
	is.Equal(v, pgstore.SchemaVersion) // now current
	s := mustOpenURL(t, url, pgstore.WithExisting())
	_, err = s.Counts(ctx)
	is.NoErr(err) // usable

	t.Run("NothingCreated", func(t *testing.T) {
		is := is.New(t)
		empty := pgtest.Schema(t)
		_, err := pgstore.Open(ctx, empty, pgstore.WithExisting())
		is.True(errors.Is(err, turnframe.ErrNotFound)) // refused
		pool, err := pgxpool.New(ctx, empty)
		is.NoErr(err)
		defer pool.Close()
		var tables int
		is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables))
		is.Equal(tables, 0) // the refusal created no table, not even goose's
	})

	t.Run("Older", func(t *testing.T) {
		is := is.New(t)
		_, err := migrated.Pool().Exec(ctx, "DELETE FROM "+pgstore.VersionTable+" WHERE version_id = $1", pgstore.SchemaVersion)
		is.NoErr(err) // the version row of the last migration gone: the schema reads one older
		_, err = pgstore.Open(ctx, url, pgstore.WithExisting())
		is.True(errors.As(err, &se))                  // refused
		is.Equal(se.Found, pgstore.SchemaVersion-1)   // older
		is.True(errors.Is(err, turnframe.ErrInvalid)) // not this build's
	})
}
