package turnframe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// lockedSettle is a row lock no one lets go of: every Settle waits until
// its context ends and is then busy. It tells of its first wait on waiting.
type lockedSettle struct {
	turnframe.Store
	once    sync.Once
	waiting chan struct{}
}

func (s *lockedSettle) Settle(ctx context.Context, _ []turnframe.OutboxSettlement) ([]error, error) {
	s.once.Do(func() { close(s.waiting) })
	<-ctx.Done()
	return nil, fmt.Errorf("lock wait: %w: %w", ctx.Err(), turnframe.ErrBusy)
}

// A try of a single settlement cut once the caller's context ended is
// written again only while its lease runs (tryWrite): never under a lease
// renewed after that end, or it would be tried, cut and renewed again for
// as long as the lock is held, and RunOnce, whose caller is shutting down,
// would not return.
func TestASettlementCutAfterTheCallersContextEndedIsTriedOnlyWithinItsLease(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &lockedSettle{Store: mem, waiting: make(chan struct{})}
	cfg := runConfig()
	cfg.SendTimeout, cfg.LeaseMargin = 2*time.Second, time.Second // leases of 3 s, well within await's safety net
	d := turnframe.NewDispatcher(store, &stepSender{clk: clk, step: 2 * time.Hour}, cfg, turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runOnceAsync(t, d, ctx, clk.read().UTC())
	<-store.waiting // the send completed, the clock stepped; its settlement waits for the lock
	cancel()        // the process shuts down before the try is cut
	report := await(t, done, "RunOnce's return once its context ended and its lease too")
	t.Logf("report %+v", report)
	is.Equal(len(report.Completed), 0) // the settlement could not be written
}

// lateCommit's first Settle waits until its context ends and is busy, but
// its write commits after all, late (a commit whose answer was lost): the
// second Settle finds it landed, yet is itself busy; the next ones go to
// the store.
type lateCommit struct {
	turnframe.Store
	mu      sync.Mutex
	calls   int
	late    []turnframe.OutboxSettlement
	waiting chan struct{}
}

func (s *lateCommit) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	switch n {
	case 1:
		close(s.waiting)
		<-ctx.Done()
		s.late = st
		return nil, fmt.Errorf("lock wait: %w: %w", ctx.Err(), turnframe.ErrBusy)
	case 2:
		if _, err := s.Store.Settle(context.Background(), s.late); err != nil { // the cut try's commit lands
			return nil, err
		}
		return nil, fmt.Errorf("locked: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

// writeAgain: a single whose try was cut, then renewed and written again,
// "may have committed before its answer was lost". When it did, and a busy
// try came between the cut one and the one refused as ErrClaimLost, its
// row stands as its settlement makes it: the send is reported Completed,
// not lost.
func TestASettlementCommittedLateByItsCutTryIsReportedAsItLandedAfterABusyTry(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &lateCommit{Store: mem, waiting: make(chan struct{})}
	d := turnframe.NewDispatcher(store, &stepSender{clk: clk, step: 2 * time.Hour}, runConfig(), turnframe.WithClock(clk.read))

	report, err := d.RunOnce(context.Background(), clk.read().UTC())
	is.NoErr(err)
	t.Logf("report %+v; %d tries", report, store.calls)
	is.Equal(store.calls, 3)                                     // cut, busy, refused as its claim was gone
	is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // reported as it landed
	is.Equal(dispGet(t, mem, rows[0].ID).Status, turnframe.OutboxCompleted)
}
