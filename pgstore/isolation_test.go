package pgstore_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DESIGN.md §14: "Every write is one transaction at READ COMMITTED", and
// the held mark of an ordered row "is an index of the rule, not the rule:
// a mark missing where it belongs costs time, never order. A mark left
// where it does not belong would keep a due row back for good" (order.go).
// pgstore begins its transactions with a plain BEGIN, so they run at the
// database's default isolation. A database (or role) whose default is
// REPEATABLE READ — a common setting — gives every write one snapshot
// taken at its first statement: an enqueue that waited for its turn's lock
// while the head row of its order key completed probes the head as it
// was, marks its new row held, and the completion's let-go ran before that
// row existed. The row is then never claimed: an effect lost without a
// word.
func TestAHeldMarkSurvivesWhenTheDatabaseDefaultIsRepeatableRead(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read"} {
		t.Run(iso, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			u := pgtest.Schema(t) + "&default_transaction_isolation=" + url.PathEscape(iso)
			s, err := pgstore.Open(ctx, u, pgstore.WithClock(pgstore.CallerClock))
			is.NoErr(err)
			t.Cleanup(func() { s.Close() })
			now := base
			head, turn, attempt := headClaimedSecondTaken(t, s, now)
			claims := []turnframe.Claim{head}

			// Another connection holds the turn's row: the commit waits for it.
			x, err := pgx.Connect(ctx, u)
			is.NoErr(err)
			defer x.Close(ctx)
			xtx, err := x.Begin(ctx)
			is.NoErr(err)
			_, err = xtx.Exec(ctx, `SELECT 1 FROM turns WHERE id = $1 FOR UPDATE`, turn.String())
			is.NoErr(err)

			committed := make(chan error, 1)
			go func() {
				_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
					Settle: []turnframe.Settlement{{Key: "second", To: turnframe.JournalCommitted, Attempt: attempt}},
					Outbox: []turnframe.OutboxMessage{{Destination: "d", OrderKey: "k"}},
				})
				committed <- err
			}()
			waitForLockWaiter(t, x)

			// Meanwhile r1 completes: the key is free.
			res, err := s.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: now}})
			is.NoErr(err)
			is.NoErr(res[0])
			is.NoErr(xtx.Commit(ctx))
			is.NoErr(<-committed)

			// r2 is due: nothing before it holds its key.
			later := now.Add(time.Hour)
			got, err := s.ClaimDue(ctx, later, 10, "w2", time.Minute)
			is.NoErr(err)
			var held bool
			is.NoErr(s.Pool().QueryRow(ctx, `SELECT held FROM outbox WHERE key = 'second'`).Scan(&held))
			t.Logf("%s: r2 held=%v, claimed %d", iso, held, len(got))
			is.Equal(len(got), 1) // the second row of key "k" is claimed once the first completed
		})
	}
}

// waitForLockWaiter returns once a backend waits for a lock conn holds
// (the call under test, blocked behind conn's lock); never another
// session's, which a concurrent test run may have. It polls the server from
// a connection of its own, outside any transaction (pg_stat_activity is
// read once per transaction), and never sleeps.
func waitForLockWaiter(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	waitForWaiterOrDone(t, conn, nil)
}

// lockHolder opens a session of its own on url and begins a transaction
// in it, for a test to take locks with and leave open; both end with t.
func lockHolder(t *testing.T, url string) (*pgx.Conn, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("lock holder: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("lock holder: begin: %v", err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	return conn, tx
}

// cancelMyWaiter waits for a backend conn's locks block and cancels exactly
// that one (pg_cancel_backend), never another session's; from a connection
// of its own, as waitForLockWaiter reads.
func cancelMyWaiter(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	waitForLockWaiter(t, conn)
	ctx := context.Background()
	c, err := pgx.ConnectConfig(ctx, conn.Config())
	if err != nil {
		t.Fatalf("cancel the waiter: %v", err)
	}
	defer c.Close(ctx)
	var cancelled bool
	if err := c.QueryRow(ctx, `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE $1::int = ANY(pg_blocking_pids(pid)) LIMIT 1`, conn.PgConn().PID()).Scan(&cancelled); err != nil || !cancelled {
		t.Fatalf("cancel the waiter: %v (cancelled %v)", err, cancelled)
	}
}

// BeginTx "starts a transaction on a connection of the store's pool, at
// READ COMMITTED" (its doc): under a database default of REPEATABLE READ it
// starts one at that default instead.
func TestBeginTxIsReadCommittedWhateverTheDefault(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t) + "&default_transaction_isolation=" + url.PathEscape("repeatable read")
	s, err := pgstore.Open(ctx, u, pgstore.WithClock(pgstore.CallerClock))
	is.NoErr(err)
	t.Cleanup(func() { s.Close() })
	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	var level string
	is.NoErr(tx.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level))
	is.Equal(level, "read committed")
}

// ApplyTx takes "a transaction of the caller's (BeginTx, or one it began on
// the same database)". One begun at REPEATABLE READ — pgx.TxOptions{IsoLevel:
// pgx.RepeatableRead}, a natural choice for an app that reads its own rows
// consistently — has its snapshot from its first statement: the enqueue's
// probe of its order key reads the head row as it was then, after the head
// completed and let its key go, and marks the new row held for good.
func TestApplyTxInARepeatableReadTransactionLeavesARowHeldForGood(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	now := base
	head, turn, attempt := headClaimedSecondTaken(t, s, now)
	claims := []turnframe.Claim{head}

	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	is.NoErr(err)
	defer tx.Rollback(ctx)
	var one int
	is.NoErr(tx.QueryRow(ctx, `SELECT 1`).Scan(&one)) // the app reads its own rows first

	res, err := s.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: now}})
	is.NoErr(err)
	is.NoErr(res[0]) // the head completes: key "k" is free

	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "second", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{{Destination: "d", OrderKey: "k"}},
	})
	if err != nil {
		return // refusing such a transaction keeps the contract
	}
	is.NoErr(tx.Commit(ctx))
	got, err := s.ClaimDue(ctx, now.Add(time.Hour), 10, "w2", time.Minute)
	is.NoErr(err)
	is.Equal(len(got), 1) // the row is due: nothing before it holds its key
}

// headClaimedSecondTaken enqueues r1, the head of order key "k", and claims
// it; then begins a turn and takes a second command on it, which will
// enqueue r2 on the same key. It returns r1's claim, the turn and the
// second command's attempt.
func headClaimedSecondTaken(t *testing.T, s *pgstore.Store, now time.Time) (turnframe.Claim, turnframe.TurnID, turnframe.AttemptID) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	ids := turnframe.NewIDGenerator()
	is.NoErr(enqueueRows(ctx, s, ids, "acme", "first", now, turnframe.OutboxMessage{Destination: "d", OrderKey: "k"}))
	claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1) // the head claimed
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "send"},
		Admit:  []turnframe.Command{{Key: "second", Case: "case-second", Name: "send"}},
		Settle: []turnframe.Settlement{{Key: "second", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	is.NoErr(err) // the second command taken
	return claims[0], turn, attempt
}
