package main

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// readBackHistoryLost runs during before settle's read back of the row (its
// second GetOutbox), and fails every History call after the first (settle's
// read of its own move in the history: a connection that just dropped).
type readBackHistoryLost struct {
	opStore
	gets, hists atomic.Int32
	during      func()
}

func (s *readBackHistoryLost) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	if s.gets.Add(1) == 2 {
		s.during()
	}
	return s.opStore.GetOutbox(ctx, id)
}

func (s *readBackHistoryLost) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	if s.hists.Add(1) > 1 {
		return nil, turnframe.ErrBusy
	}
	return s.opStore.History(ctx, subject, after, limit)
}

// DESIGN.md §11: "`settle` prints the move its own decision made as the
// history records it (its actor, code and note), with that record's code
// and reference, not a later send's." The operator resends an unknown row;
// a live dispatcher claims it and the remote completes it before settle
// reads it back; settle's read of its own move in the history then fails.
// It falls back on the row as read back and prints the dispatcher's
// completion, with the remote's code, as the operator's move: the operator
// believes they marked it completed.
func TestSettleWhoseOwnMoveCannotBeReadNeverPrintsALaterSend(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		f := mustFixture(t)
		store := openFixture(t, f)
		settleReadBackHistoryLost(t, f, store, sqliteOps{store})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		f := mustPGFixture(t)
		store := openPGFixture(t, f)
		settleReadBackHistoryLost(t, f, store, pgOps{Store: store, name: "pg"})
	})
}

func settleReadBackHistoryLost(t *testing.T, f fixture, store turnframe.Store, ops opStore) {
	is := is.New(t)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	racing := &readBackHistoryLost{opStore: ops, during: func() {
		claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
		is.NoErr(err)
		for _, c := range claims {
			if c.ID == f.unknown {
				res, err := store.Settle(ctx, []turnframe.OutboxSettlement{{Claim: c, To: turnframe.OutboxCompleted, Code: "remote.created", RemoteRef: "r-77", Now: now}})
				is.NoErr(err)
				is.NoErr(res[0])
			}
		}
		is.Equal(dispStatus(t, store, f.unknown), turnframe.OutboxCompleted)
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req := settleRequest{id: f.unknown, decision: turnframe.Decision{Verdict: turnframe.VerdictResend, Code: "operator.resend", Actor: turnframe.ActorOperator}}
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	t.Logf("printed: %q", out.String())
	is.True(!strings.Contains(out.String(), "remote.created"))           // not the later send's code
	is.True(strings.Contains(out.String(), "outcome_unknown → pending")) // the move the operator made
}
