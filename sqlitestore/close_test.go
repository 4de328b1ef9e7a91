package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// After Close every method returns ErrClosed, whatever its input.
func TestClosed(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	applied := mustCommit(t, s, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
	row := applied.Outbox[0]
	claim := turnframe.Claim{OutboxEntry: row, Worker: "w"}
	claim.Attempts = 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Close", s.Close},
		{"Apply", func() error { _, err := s.Apply(ctx, begin("acme")); return err }},
		{"BeginTx", func() error { _, err := s.BeginTx(ctx); return err }},
		{"TurnPhase", func() error { _, err := s.TurnPhase(ctx, "acme", row.Turn); return err }},
		{"LoadTurn", func() error { _, err := s.LoadTurn(ctx, "acme", row.Turn); return err }},
		{"ListUnfinishedTurns", func() error { _, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 1); return err }},
		{"ForTurn", func() error { _, err := s.ForTurn(ctx, "acme", row.Turn); return err }},
		{"ByKey", func() error { _, err := s.ByKey(ctx, "acme", "k1"); return err }},
		{"EventsByID", func() error { _, err := s.EventsByID(ctx, "acme", nil); return err }},
		{"EventsSince", func() error { _, err := s.EventsSince(ctx, "acme", "booking/1", 0, 1); return err }},
		{"CaseRevision", func() error { _, err := s.CaseRevision(ctx, "acme", "booking/1"); return err }},
		{"Replay", func() error { _, err := s.Replay(ctx, "acme", row.Turn); return err }},
		{"ClaimDue", func() error { _, err := s.ClaimDue(ctx, t0, 1, "w", lease); return err }},
		{"Complete", func() error { return turnframe.CompleteClaim(ctx, s, claim, "", t0) }},
		{"Retry", func() error { return turnframe.RetryClaim(ctx, s, claim, "", t0) }},
		{"Fail", func() error { return turnframe.FailClaim(ctx, s, claim, "", t0) }},
		{"MarkUnknown", func() error { return turnframe.MarkClaimUnknown(ctx, s, claim, "", t0) }},
		{"Settle", func() error { _, err := s.Settle(ctx, nil); return err }},
		{"Resolve", func() error {
			return s.Resolve(ctx, turnframe.Resolution{ID: row.ID, Verdict: turnframe.VerdictCompleted, Now: t0})
		}},
		{"Requeue", func() error { return s.Requeue(ctx, row.ID, 0, t0) }},
		{"ExpireClaims", func() error { _, err := s.ExpireClaims(ctx, t0); return err }},
		{"ReleaseClaim", func() error { return s.ReleaseClaim(ctx, row.ID, 0, t0) }},
		{"ExtendClaims", func() error {
			_, err := s.ExtendClaims(ctx, []turnframe.Claim{claim}, t0, lease)
			return err
		}},
		{"ApplyTx", func() error { _, err := s.ApplyTx(ctx, &sql.Tx{}, begin("acme")); return err }},
		{"GetOutbox", func() error { _, err := s.GetOutbox(ctx, row.ID); return err }},
		{"ListOutbox", func() error { _, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1}); return err }},
		{"Prune", func() error { _, err := s.Prune(ctx, t0); return err }},
		{"History", func() error {
			_, err := s.History(ctx, turnframe.OutboxSubject("acme", row.ID), 0, 1)
			return err
		}},
		{"RecordEvidence", func() error {
			return s.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.OutboxSubject("acme", row.ID), "", turnframe.ActorOperator, "", "", "looked", t0))
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(c.call(), turnframe.ErrClosed))
		})
	}
}

// Issue 11, item 10: with a transaction from BeginTx open, an Apply waiting
// for the writer it holds and a Close, every call returns. Close fails the
// waiting Apply with ErrClosed and returns without waiting for the
// transaction; the transaction's next call on the store is ErrClosed, its
// Commit or Rollback still works, and then its connection goes.
func TestCloseWithTransactionOpenAndApplyWaiting(t *testing.T) {
	tests := []struct {
		name   string
		commit bool
		seats  int // the application's rows after the transaction ends
	}{
		{name: "CommitStillCommits", commit: true, seats: 1},
		{name: "RollbackStillRollsBack", commit: false, seats: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "close.db")
			// Not mustOpen: its cleanup would Close again, and on a store
			// that hangs that would hang the test binary instead of failing.
			s, err := sqlitestore.Open(ctx, path)
			is.NoErr(err)
			tx, err := s.BeginTx(ctx)
			is.NoErr(err)
			_, err = tx.ExecContext(ctx, `CREATE TABLE seats (seat TEXT PRIMARY KEY) STRICT`)
			is.NoErr(err)

			applied := make(chan error, 1)
			go func() { _, err := s.Apply(ctx, begin("acme")); applied <- err }()
			waitFor(t, "the Apply to wait for the writer", func() bool { return sqlitestore.WriterWaits(s) > 0 })

			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			// Close has begun once a new call is refused. (A call that meets
			// a Close waiting behind the Apply, as it did, blocks: waitFor's
			// safety net then fails the test.)
			waitFor(t, "Close to refuse new calls", func() bool {
				_, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
				return errors.Is(err, turnframe.ErrClosed)
			})

			is.True(errors.Is(receive(t, "the waiting Apply", applied), turnframe.ErrClosed)) // the Apply gave up
			is.NoErr(receive(t, "Close", closed))                                             // Close returned, the transaction still open

			_, err = s.ApplyTx(ctx, tx, begin("acme"))
			is.True(errors.Is(err, turnframe.ErrClosed)) // the transaction's next call on the store
			_, err = tx.ExecContext(ctx, `INSERT INTO seats (seat) VALUES ('1A')`)
			is.NoErr(err) // the transaction itself still works
			if tc.commit {
				is.NoErr(tx.Commit())
			} else {
				is.NoErr(tx.Rollback())
			}
			is.Equal(sqlitestore.WriterConnections(s), 0) // its connection went with it

			again, err := sqlitestore.Open(ctx, path)
			is.NoErr(err)
			defer again.Close()
			var seats int
			err = again.ReadDB().QueryRowContext(ctx, `SELECT count(*) FROM seats`).Scan(&seats)
			if tc.commit {
				is.NoErr(err)
				is.Equal(seats, tc.seats) // the committed row is in the file
			} else {
				is.True(err != nil) // the table was rolled back with the row
			}
			turns, err := again.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
			is.NoErr(err)
			is.Equal(len(turns), 0) // the refused Apply wrote nothing
		})
	}
}

// safetyNet bounds a wait that must end at once: reaching it fails the test
// (something blocked for ever); it never decides an outcome.
const safetyNet = 10 * time.Second

// waitFor calls cond, from a goroutine of its own, until it holds, and
// fails the test if that takes longer than the safety net (cond may block).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for !cond() {
			runtime.Gosched()
		}
		done <- nil
	}()
	receive(t, what, done)
}

// receive returns the next value of ch, or fails the test if none comes
// within the safety net.
func receive(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	timer := time.NewTimer(safetyNet)
	defer timer.Stop()
	select {
	case err := <-ch:
		return err
	case <-timer.C:
		t.Fatalf("%s: still blocked after %v", what, safetyNet)
		return nil
	}
}
