package turnframe_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// stepSender completes every send, stepping its clock forward by step just
// before it answers.
type stepSender struct {
	clk  *osClock
	step time.Duration
}

func (s *stepSender) Send(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
	s.clk.step.Store(int64(s.step))
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// waitedSettle makes the first Settle wait, as a write waits for a lock,
// until its context ends (then it is busy, as a lock wait cut short is),
// and tells of the wait on waiting. With committed set, that first Settle
// is written before it waits: a commit whose answer was lost.
type waitedSettle struct {
	turnframe.Store
	committed bool
	first     atomic.Bool
	waiting   chan struct{}
}

func (s *waitedSettle) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	if s.first.CompareAndSwap(false, true) {
		if s.committed {
			if _, err := s.Store.Settle(ctx, st); err != nil {
				return nil, err
			}
		}
		close(s.waiting)
		<-ctx.Done()
		return nil, fmt.Errorf("lock wait: %w: %w", ctx.Err(), turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

// DESIGN.md §8: "A settlement always lands. One refused as ErrBusy is tried
// again with backoff until it lands ... until the rows' leases ended", each
// try "bounded by what is left of the rows' leases (at least a second)".
// After a forward step of the wall clock, what is left reads as nothing,
// so a try that waits a second for a lock (a busy SQLite file) is cut, and
// a cut single was given up at once: the row of a completed send was
// reported Unsettled, left to its lease, expired, and sent again by its
// policy — though the keeper follows the step (DESIGN.md "One clock") and
// its lease was extended meanwhile.
func TestASettlementCutAfterAStepIsWrittenAgainWhileItsClaimHolds(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &waitedSettle{Store: mem, waiting: make(chan struct{})}
	d := turnframe.NewDispatcher(store, &stepSender{clk: clk, step: 2 * time.Hour}, runConfig(), turnframe.WithClock(clk.read))
	rec := turnframe.NewRecovery(mem, turnframe.WithClock(clk.read))

	report, err := d.RunOnce(context.Background(), clk.read().UTC())
	is.NoErr(err)
	<-store.waiting
	got := dispGet(t, mem, rows[0].ID)
	t.Logf("report %+v; the row is %v, its lease until %v, the clock at %v", report, got.Status, got.LeaseUntil, clk.read().UTC())
	is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // the completed send's settlement landed
	is.Equal(got.Status, turnframe.OutboxCompleted)

	later, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, boundsNoop{})
	is.NoErr(err)
	is.Equal(len(later.Expired), 0) // nothing left to expire, nor to send again
}

// A single settlement whose try committed but was cut before its answer
// came (a lost connection, a commit acknowledged late) is not "could not be
// settled": its claim is gone because it landed, and its row's history
// says so. It was reported Unsettled and logged for an operator to settle
// by hand.
func TestASingleSettlementCutAfterItsCommitIsReportedAsItLanded(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &waitedSettle{Store: mem, committed: true, waiting: make(chan struct{})}
	d := turnframe.NewDispatcher(store, &stepSender{clk: clk, step: 2 * time.Hour}, runConfig(), turnframe.WithClock(clk.read))

	report, err := d.RunOnce(context.Background(), clk.read().UTC())
	is.NoErr(err)
	<-store.waiting
	is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // the settlement landed, and is reported so
	is.Equal(len(report.Unsettled), 0)                           // not left for an operator
	is.Equal(dispGet(t, mem, rows[0].ID).Status, turnframe.OutboxCompleted)
}
