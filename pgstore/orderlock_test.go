package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// order.go: "every statement that changes marks runs under the key's
// advisory lock, taken before it reads (orderLocks): with concurrent
// writers, the enqueue of a row and the settlement that lets the key go
// could otherwise each miss the other, and leave the new row held behind
// nothing." Here the enqueue is a caller's transaction (ApplyTx), still
// open: its row is marked held behind the head, and it holds the key's
// lock. The head's move that lets the key go must wait for it, and then
// let the new row go; else the row is held for good and never sent.
func TestAMoveThatLetsAKeyGoWaitsForAnOpenEnqueueOfTheKey(t *testing.T) {
	now := base
	for _, tc := range []struct {
		name string
		free func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error
	}{
		{"settled", func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error {
			return turnframe.CompleteClaim(ctx, s, head, "", now)
		}},
		{"resolved", func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error {
			return s.Resolve(ctx, turnframe.Resolution{ID: head.ID, Verdict: turnframe.VerdictFailed, Actor: turnframe.ActorOperator, Now: now})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
			head, turn, attempt := headClaimedSecondTaken(t, s, now)
			if tc.name == "resolved" {
				is.NoErr(turnframe.MarkClaimUnknown(ctx, s, head, "", now)) // the head's outcome unknown
			}

			tx, err := s.BeginTx(ctx)
			is.NoErr(err)
			defer tx.Rollback(context.Background())
			_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
				Settle: []turnframe.Settlement{{Key: "second", To: turnframe.JournalCommitted, Attempt: attempt}},
				Outbox: []turnframe.OutboxMessage{{Destination: "d", OrderKey: "k"}},
			})
			is.NoErr(err) // the second row enqueued, held behind the head, not yet committed

			done := make(chan error, 1)
			go func() { done <- tc.free(ctx, s, head) }()
			freed := waitForWaiterOrDone(t, tx.Conn(), done)
			is.NoErr(tx.Commit(ctx))
			if freed == nil {
				freed = done
			}
			is.NoErr(<-freed) // the head no longer holds the key

			got, err := s.ClaimDue(ctx, now.Add(time.Hour), 10, "w2", time.Minute)
			is.NoErr(err)
			is.Equal(len(got), 1) // the second row goes: nothing before it holds its key
		})
	}
}

// waitForWaiterOrDone returns once a backend waits for a lock conn holds
// (nil), or once done has a value (then a channel that gives that value
// again); a nil done never has one. It polls from a connection of its
// own, outside any transaction (pg_stat_activity is read once per
// transaction), for conn's waiters only, and never sleeps.
func waitForWaiterOrDone(t *testing.T, conn *pgx.Conn, done <-chan error) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch, err := pgx.ConnectConfig(ctx, conn.Config())
	if err != nil {
		t.Fatalf("wait for a lock waiter: %v", err)
	}
	defer watch.Close(context.Background())
	for {
		select {
		case err := <-done:
			again := make(chan error, 1)
			again <- err
			return again
		default:
		}
		var n int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1::int = ANY(pg_blocking_pids(pid))`, conn.PgConn().PID()).Scan(&n); err != nil {
			t.Fatalf("wait for a lock waiter: %v", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// A settlement needs the claim (DESIGN.md §5: "the row still Dispatching
// under the same worker and attempt number (ErrClaimLost otherwise)"), and
// a resolution an OutcomeUnknown row (ErrConflict otherwise): each rule
// reads the row as it is once it holds it ("The rows are locked before the
// rule reads them", Settle). Here another transaction is moving the row
// (an expiry; a person's resolution) when the call comes: the call must
// wait for it and judge the row as that transaction left it, never write
// over its move.
func TestAMoveOfARowAnotherTransactionIsMovingJudgesTheRowItLeft(t *testing.T) {
	now := base
	for _, tc := range []struct {
		name  string
		setup func(is *is.I, ctx context.Context, s *pgstore.Store, head turnframe.Claim)
		other string // the other transaction's move of the row ($1, its id)
		call  func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error
		want  error
		then  turnframe.OutboxStatus
	}{
		{"a settlement while the claim expires", func(*is.I, context.Context, *pgstore.Store, turnframe.Claim) {},
			`UPDATE outbox SET status = 'outcome_unknown', last_code = 'turnframe.lease_ended', lease_until = 0 WHERE id = $1`,
			func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error {
				return turnframe.CompleteClaim(ctx, s, head, "", now)
			}, turnframe.ErrClaimLost, turnframe.OutboxOutcomeUnknown},
		{"a resend while the row is resolved completed", func(is *is.I, ctx context.Context, s *pgstore.Store, head turnframe.Claim) {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, s, head, "", now))
		},
			`UPDATE outbox SET status = 'completed', finished_at = updated_at WHERE id = $1`,
			func(ctx context.Context, s *pgstore.Store, head turnframe.Claim) error {
				return s.Resolve(ctx, turnframe.Resolution{ID: head.ID, Verdict: turnframe.VerdictResend, Actor: turnframe.ActorOperator, Now: now})
			}, turnframe.ErrConflict, turnframe.OutboxCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
			head, _, _ := headClaimedSecondTaken(t, s, now)
			tc.setup(is, ctx, s, head)

			other, err := s.Pool().Begin(ctx)
			is.NoErr(err)
			defer other.Rollback(context.Background())
			_, err = other.Exec(ctx, tc.other, head.ID.String())
			is.NoErr(err)

			done := make(chan error, 1)
			go func() { done <- tc.call(ctx, s, head) }()
			got := waitForWaiterOrDone(t, other.Conn(), done)
			is.NoErr(other.Commit(ctx))
			if got == nil {
				got = done
			}
			err = <-got
			is.True(errors.Is(err, tc.want)) // judged on the row the other transaction left
			row, err := s.GetOutbox(ctx, head.ID)
			is.NoErr(err)
			is.Equal(row.Status, tc.then) // and its move stands
		})
	}
}
