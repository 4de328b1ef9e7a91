package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// historyReadRace is an opStore whose first History call (settle's read of
// the last record before its write) runs during once it has answered.
type historyReadRace struct {
	opStore
	during func()
	done   atomic.Bool
}

func (s *historyReadRace) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	page, err := s.opStore.History(ctx, subject, after, limit)
	if s.done.CompareAndSwap(false, true) {
		s.during()
	}
	return page, err
}

// The row needs intervention. Operator 1 runs 'turnframe settle ID resend';
// settle reads the row and its history's last record. Before its write,
// operator 2 (same default actor, same decision) resends it —
// needs_intervention → pending —, a dispatcher claims it and its send goes
// unknown. Operator 1's resend would now settle a send nobody has looked
// at, and its line would have printed operator 2's move as its own: it is
// refused (fenced on the attempt it read), and says nothing was settled.
func TestSettleOfARowSentAgainSinceItsReadIsRefused(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := escalate(t, f)
	now := f.t0.Add(25 * time.Hour)
	racing := &historyReadRace{opStore: sqliteOps{store}, during: func() {
		resendAndLoseAgain(t, store, f, now) // operator 2
	}}
	out, err := settleAs(t, f, store, racing, now, "resend")
	is.True(racing.done.Load())
	is.True(errors.Is(err, turnframe.ErrConflict))                            // sent again since it was read
	is.Equal(out, "")                                                         // nothing claimed as its move
	is.Equal(dispStatus(t, store, f.unknown), turnframe.OutboxOutcomeUnknown) // the new send's outcome, for a person to look at
}

// failingFirstHistory is an opStore whose first History call fails (a read
// on a connection that just dropped, say); later calls go through.
type failingFirstHistory struct {
	opStore
	failed atomic.Bool
}

func (s *failingFirstHistory) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, turnframe.ErrBusy
	}
	return s.opStore.History(ctx, subject, after, limit)
}

// The row needed intervention; an operator resent it (needs_intervention →
// pending), it was sent again and went unknown. Now 'turnframe settle ID
// resend' again, and settle's read of the history before its write fails
// (a transient error). It ignored the error and printed the earlier resend
// as its own move; it now settles nothing and says why.
func TestSettleWhoseHistoryCannotBeReadSettlesNothing(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := escalate(t, f)
	now := f.t0.Add(25 * time.Hour)
	resendAndLoseAgain(t, store, f, now)

	flaky := &failingFirstHistory{opStore: sqliteOps{store}}
	out, err := settleAs(t, f, store, flaky, now, "resend")
	is.True(errors.Is(err, turnframe.ErrBusy))                                // the read's error: try again
	is.Equal(out, "")                                                         // no move printed
	is.Equal(dispStatus(t, store, f.unknown), turnframe.OutboxOutcomeUnknown) // nothing settled
}

// settleAs runs 'turnframe settle ROW verdict' as an operator at now,
// through ops, and returns what it printed and its error.
func settleAs(t *testing.T, f fixture, store *sqlitestore.Store, ops opStore, now time.Time, verdict string) (string, error) {
	t.Helper()
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req, err := parseSettle([]string{f.unknown.String(), verdict}, settleFlags{actor: string(turnframe.ActorOperator)})
	if err != nil {
		t.Fatal(err)
	}
	err = settleRow(context.Background(), e, ops, rec, req, &dbFlags{path: f.path})
	return out.String(), err
}

// resendAndLoseAgain settles the fixture's escalated row as an operator
// would ('settle ID resend'), and a live dispatcher claims it and its send
// goes unknown: the row is outcome_unknown again, one attempt later.
func resendAndLoseAgain(t *testing.T, store *sqlitestore.Store, f fixture, now time.Time) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	rec := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return now }))
	is.NoErr(rec.Settle(ctx, turnframe.OutboxSubject(fixtureAccount, f.unknown),
		turnframe.Decision{Verdict: turnframe.VerdictResend, Code: "operator.resend", Actor: turnframe.ActorOperator}))
	claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
	is.NoErr(err)
	for _, c := range claims {
		if c.ID == f.unknown {
			is.NoErr(turnframe.MarkClaimUnknown(ctx, store, c, "", now))
		}
	}
	is.Equal(dispStatus(t, store, f.unknown), turnframe.OutboxOutcomeUnknown)
}

func dispStatus(t *testing.T, store turnframe.Store, id turnframe.OutboxID) turnframe.OutboxStatus {
	t.Helper()
	r, err := store.GetOutbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// 'turnframe settle ID completed' lands (outcome_unknown → completed); the
// application, which prunes every finished row at once (Prune(now)), prunes
// it before settle reads it back. The settlement was made: settle must say
// so (exit 0, its move printed), not fail as if nothing happened.
func TestSettleOfARowPrunedRightAfterItsMoveSaysItSettled(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	racing := &settleReadBack{opStore: sqliteOps{store}, during: func() {
		n, err := store.Prune(ctx, now.Add(time.Second)) // the app's prune of everything finished
		is.NoErr(err)
		is.True(n >= 1)
	}}
	out, err := settleAs(t, f, store, racing, now, "completed")
	t.Logf("printed: %q; error: %v", out, err)
	is.NoErr(err) // the settlement landed
	is.True(strings.Contains(out, "outcome_unknown → completed"))
}
