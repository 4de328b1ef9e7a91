package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// PgxTx: "An app that ignores such an error (treating a unique violation
// as "already there", say) loses the whole Write on PostgreSQL ...: Apply
// then reports ErrAppWrite", and ApplyTx "returns the same errors as
// Apply". In ApplyTx the app's failed statement aborts the caller's
// transaction, and the savepoint's release is what meets it: that too is
// the app's failure, ErrAppWrite, and the caller's own rows stay.
func TestApplyTxWithAnAppThatSwallowsItsSQLErrorIsErrAppWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := withAppTable(t, mustOpen(t, pgstore.WithClock(pgstore.CallerClock)))
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('dup', 'x')`)
	is.NoErr(err)
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('mine', 'z')`)
	is.NoErr(err) // the caller's own row
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "hi"},
		App: func(ctx context.Context, atx turnframe.Tx) error {
			_ = s.PutAppRow(ctx, atx, "dup", "y") // ignored: "already there"
			return nil
		}})
	t.Logf("ApplyTx: %v", err)
	is.True(errors.Is(err, turnframe.ErrAppWrite)) // the app's failure, as Apply says
	is.NoErr(tx.Commit(ctx))                       // the caller's transaction goes on
	rows, err := s.AppRows(ctx)
	is.NoErr(err)
	is.Equal(rows["mine"], "z") // with its own row
	_, lerr := s.LoadTurn(ctx, "acme", turn)
	is.True(errors.Is(lerr, turnframe.ErrNotFound)) // and nothing of the Write
}

// takenCommand begins a turn of account at now, admits key on case c and
// takes it, and returns the turn and the attempt.
func takenCommand(t *testing.T, s turnframe.Store, ids *turnframe.IDGenerator, key turnframe.IdempotencyKey, c turnframe.CaseKey, now time.Time) (turnframe.TurnID, turnframe.AttemptID) {
	t.Helper()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	_, err := s.Apply(context.Background(), turnframe.Write{
		Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "go"},
		Admit:  []turnframe.Command{{Key: key, Case: c, Name: "go"}},
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	if err != nil {
		t.Fatalf("take %q: %v", key, err)
	}
	return turn, attempt
}

// DESIGN.md §14: "the writers of one case ... take a transaction-scoped
// advisory lock on it", and Expect is "an optimistic check on a case" (§6):
// a Write expecting a case at a revision lands only if the case is at it
// when the Write commits. Two commits, each appending to one case and
// expecting the other unchanged, cannot both land: one of them must see the
// other's event (write skew otherwise: each case moved under a Write that
// relied on it standing still). The first is held open (ApplyTx, not yet
// committed); the second must wait for it and then be refused.
func TestTwoCommitsEachExpectingTheOthersCaseCannotBothLand(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	turnA, attemptA := takenCommand(t, s, ids, "a", "case-a", base)
	turnB, attemptB := takenCommand(t, s, ids, "b", "case-b", base)

	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback(context.Background())
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turnA, Now: base,
		Settle: []turnframe.Settlement{{Key: "a", To: turnframe.JournalCommitted, Attempt: attemptA}},
		Events: []turnframe.Event{{Case: "case-a", Type: "moved"}},
		Expect: map[turnframe.CaseKey]turnframe.CaseRevision{"case-b": 0},
	})
	is.NoErr(err) // A: case-a moves, case-b expected unmoved; not yet committed

	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turnB, Now: base,
			Settle: []turnframe.Settlement{{Key: "b", To: turnframe.JournalCommitted, Attempt: attemptB}},
			Events: []turnframe.Event{{Case: "case-b", Type: "moved"}},
			Expect: map[turnframe.CaseKey]turnframe.CaseRevision{"case-a": 0},
		})
		done <- err
	}()
	got := waitForWaiterOrDone(t, tx.Conn(), done)
	is.NoErr(tx.Commit(ctx)) // A lands
	if got == nil {
		got = done
	}
	err = <-got
	t.Logf("B: %v", err)
	is.True(errors.Is(err, turnframe.ErrConflict)) // B relied on case-a unmoved, and A moved it
}

// DESIGN.md §14, Clock: every time a call gives is moved into the
// database's frame by the difference between the database's clock and the
// caller's now, and "a time read back in a later call is the written one
// moved by how far the two clocks drifted between the calls". A group
// commit's now is its latest settlement's (the dispatcher batches
// settlements made at different moments): each settlement's time, the
// earlier one's included, reads back as itself, not shifted by the spread
// of the batch.
func TestAGroupCommitsTimesReadBackAsGiven(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t) // DatabaseClock, the host clock the real one
	now := time.Now()
	claimed := now.Add(-2 * time.Hour)
	is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", claimed,
		turnframe.OutboxMessage{Destination: "d"}, turnframe.OutboxMessage{Destination: "d"}))
	cs, err := s.ClaimDue(ctx, claimed, 10, "w", 3*time.Hour)
	is.NoErr(err)
	is.Equal(len(cs), 2)
	earlier := now.Add(-time.Hour)
	res, err := s.Settle(ctx, []turnframe.OutboxSettlement{
		{Claim: cs[0], To: turnframe.OutboxCompleted, Now: earlier}, // answered an hour ago
		{Claim: cs[1], To: turnframe.OutboxCompleted, Now: now},     // answered now
	})
	is.NoErr(err)
	is.NoErr(res[0])
	is.NoErr(res[1])
	drift := time.Minute // far above the two clocks' drift between the calls
	for i, want := range []time.Time{earlier, now} {
		r, err := s.GetOutbox(ctx, cs[i].ID)
		is.NoErr(err)
		off := r.FinishedAt.Sub(want)
		t.Logf("row %d finished at %v, given %v (off by %v)", i, r.FinishedAt, want, off)
		is.True(off < drift && off > -drift) // read back as given
	}
}

// DESIGN.md §6: the App runs "last — after every check of the Write passed
// and everything else of it was staged", and "A refused Write never calls
// them (ErrInvalid, ErrNotFound, ErrConflict): the checks all come first."
// A commit whose outbox row's key a row of the account holds already (the
// unique index arbitrates it: ErrConflict) is refused before its App runs,
// and is ErrConflict, not the app's failure.
func TestACommitRefusedByARowKeyNeverCallsItsApp(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := withAppTable(t, mustOpen(t, pgstore.WithClock(pgstore.CallerClock)))
	ids := turnframe.NewIDGenerator()
	is.NoErr(enqueueRows(ctx, s, ids, "acme", "old", base, turnframe.OutboxMessage{Destination: "d"}))
	_, err := s.Pool().Exec(ctx, `UPDATE outbox SET key = 'pay' WHERE key = 'old'`) // a row that holds the key already
	is.NoErr(err)
	turn, attempt := takenCommand(t, s, ids, "pay", "case-pay", base)
	called := false
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Settle: []turnframe.Settlement{{Key: "pay", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{{Destination: "d"}},
		App: func(ctx context.Context, tx turnframe.Tx) error {
			called = true
			return s.PutAppRow(ctx, tx, "paid", "yes")
		}})
	t.Logf("Apply: %v", err)
	is.True(errors.Is(err, turnframe.ErrConflict))  // the row key exists
	is.True(!errors.Is(err, turnframe.ErrAppWrite)) // not the app's failure
	is.True(!called)                                // and the app never ran
}

// The same for every constraint PostgreSQL can defer (DESIGN.md §14: "an
// app's deferred constraint that fails at the COMMIT is ErrAppWrite, as an
// immediate one is"): a foreign key (23503) and an exclusion constraint
// (23P01), as well as a unique one.
func TestEveryKindOfDeferredViolationOfTheAppsIsErrAppWrite(t *testing.T) {
	for _, tc := range []struct{ name, ddl, seed, app string }{
		{"exclusion",
			`CREATE TABLE seats (seat text, CONSTRAINT one_per_seat EXCLUDE USING btree (seat WITH =) DEFERRABLE INITIALLY DEFERRED)`,
			`INSERT INTO seats (seat) VALUES ('1A')`, `INSERT INTO seats (seat) VALUES ('1A')`},
		{"foreign key",
			`CREATE TABLE flights (id text PRIMARY KEY); CREATE TABLE seats (flight text REFERENCES flights (id) DEFERRABLE INITIALLY DEFERRED)`,
			`SELECT 1`, `INSERT INTO seats (flight) VALUES ('LX1')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
			_, err := s.Pool().Exec(ctx, tc.ddl)
			is.NoErr(err)
			_, err = s.Pool().Exec(ctx, tc.seed)
			is.NoErr(err)
			ids := turnframe.NewIDGenerator()
			turn := ids.TurnID(base)
			_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
				Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
				App: func(ctx context.Context, tx turnframe.Tx) error {
					ptx, _ := pgstore.PgxTx(tx)
					_, err := ptx.Exec(ctx, tc.app) // checked at the commit
					return err
				},
			})
			t.Logf("apply: %v", err)
			is.True(errors.Is(err, turnframe.ErrAppWrite)) // the app's writes failed
			_, err = s.LoadTurn(ctx, "acme", turn)
			is.True(errors.Is(err, turnframe.ErrNotFound)) // and the Write is not there
		})
	}
}
