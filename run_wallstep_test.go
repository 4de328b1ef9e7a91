package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// expireSpy tells of each ExpireClaims whose now is at or after after.
type expireSpy struct {
	turnframe.Store
	after   time.Time
	expired chan []turnframe.OutboxID
}

func (s *expireSpy) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	ids, err := s.Store.ExpireClaims(ctx, now)
	if err == nil && !now.Before(s.after) {
		select {
		case s.expired <- ids:
		default:
		}
	}
	return ids, err
}

// RELIABILITY §17 row 5 (TestAForwardWallStepNeverLetsAReleaseTakeALiveSweepsRow):
// after the wall clock stepped forward past a lease, "the next release, in
// the same process, took the row of a live send, which the policy sent
// again"; the fix has the sweep's keeper extend on the wall reading. That
// test waits for two extensions after the step before it releases. Run
// does not: with the defaults it releases on every poll (1 s) and the
// keeper extends every LeaseMargin/2 (15 s), so the first release after the
// step, in the same process, expires the row of the live send — DESIGN.md
// "One clock": "a sweep follows a clock the machine stepped".
func TestAForwardWallStepNeverLetsRunsReleaseTakeItsOwnLiveSend(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	spy := &expireSpy{Store: mem, after: clk.read().Add(time.Hour), expired: make(chan []turnframe.OutboxID, 1)}
	gate := newSendGate()
	cfg := turnframe.DefaultDispatchConfig("w1") // sends of 30 s, leases of 60 s
	cfg.Concurrency = 2
	// A release every millisecond: the first after the step comes long
	// before the keeper's next look (within a second), so only the
	// release's own catch-up keeps the live send's row.
	cfg.PollInterval = time.Millisecond
	d := turnframe.NewDispatcher(spy, gate, cfg, turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	first := <-gate.started // the send runs
	is.Equal(first.ID, rows[0].ID)

	clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours (a VM resumed)
	var expired []turnframe.OutboxID
	select {
	case expired = <-spy.expired: // Run's next release, on the stepped clock
	case <-time.After(time.Minute):
		t.Fatal("Run never released after the step")
	}
	got := dispGet(t, mem, rows[0].ID)
	t.Logf("released %v; the row is %v, its send still running", expired, got.Status)
	if len(expired) > 0 {
		select {
		case again := <-gate.started: // the policy resends an undeclared destination's ended claim
			t.Logf("and it was sent again beside the running send: %v", again.ID)
		case <-time.After(10 * time.Second):
		}
	}
	close(gate.proceed)
	cancel()
	is.NoErr(<-ran)
	is.Equal(len(expired), 0)                         // the live send's claim is not expired
	is.Equal(got.Status, turnframe.OutboxDispatching) // still held by the sweep whose send runs
}

// A Recovery beside the Dispatcher (Recovery.Run in the same process, or
// another process's) knows nothing of its live sweeps: after a forward
// step it would take the row of a live send until the keeper follows the
// step. The keeper looks for such a step every second, between its
// extensions (every LeaseMargin/2: 15 s with the defaults, the window it
// used to leave), and extends at once; the Recover after that leaves the
// row to its live send.
func TestAKeeperFollowsAForwardWallStepWithinASecondNotAtItsNextExtension(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	released := &expireSpy{Store: mem, expired: make(chan []turnframe.OutboxID, 1)}
	spy := &extendSpy{Store: released, extended: make(chan time.Time, 1)}
	gate := newSendGate()
	d := turnframe.NewDispatcher(spy, gate, runConfig(), turnframe.WithClock(clk.read)) // default margins: an extension every 15 s
	rec := turnframe.NewRecovery(mem, turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	first := <-gate.started // the send runs
	is.Equal(first.ID, rows[0].ID)
	<-released.expired // Run's first release is over, and its catch-up with it: the next is an hour away

	stepped := clk.read().Add(2 * time.Hour)
	clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
	select {
	case at := <-spy.extended:
		is.True(!at.Before(stepped.Add(-time.Minute))) // extended on the stepped clock
	case <-time.After(10 * time.Second): // a bound for the failure, under the 15 s the keeper used to wait
		t.Fatal("the keeper did not follow the step before its next extension")
	}
	report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, boundsNoop{})
	is.NoErr(err)
	got := dispGet(t, mem, rows[0].ID)
	close(gate.proceed)
	cancel()
	is.NoErr(<-ran)
	is.Equal(len(report.Expired), 0)                  // the live send's claim is not expired
	is.Equal(got.Status, turnframe.OutboxDispatching) // still its live sweep's
}

// stepOnRead is a wall clock that steps forward by step at its reads-th
// reading from arm on: a step that lands between two given readings.
type stepOnRead struct {
	osClock
	left atomic.Int64
	by   time.Duration
}

func (c *stepOnRead) arm(reads int, by time.Duration) {
	c.by = by
	c.left.Store(int64(reads))
}

func (c *stepOnRead) read() time.Time {
	if c.left.Add(-1) == 0 {
		c.step.Store(int64(c.by))
	}
	return c.osClock.read()
}

// Run's release caught its own live sweeps up to the clock (catchUp) and
// then read the clock for the expiry: a forward step between the two
// readings (CI caught it on Run's first release, which runs beside the
// first claim) expired the row of the live send, which catchUp had found
// in no danger. The release now reads its clock first. The step here comes
// at the second reading after the send started: the expiry's, on the old
// order; the catch-up's, on the new one.
func TestAStepBetweenRunsCatchUpAndItsExpiryLeavesTheLiveSendsRow(t *testing.T) {
	is := is.New(t)
	clk := &stepOnRead{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	gate := newSendGate()
	d := turnframe.NewDispatcher(mem, gate, runConfig(), turnframe.WithClock(clk.read)) // the keeper looks every second: not within this test's few readings
	done := make(chan error, 1)
	go func() {
		_, err := d.RunOnce(context.Background(), clk.read().UTC())
		done <- err
	}()
	<-gate.started // the send runs

	clk.arm(2, 2*time.Hour)
	is.NoErr(turnframe.Release(context.Background(), d))
	got := dispGet(t, mem, rows[0].ID)
	close(gate.proceed)
	is.NoErr(<-done)
	is.True(clk.left.Load() < 0)                      // the clock stepped during the release
	is.Equal(got.Status, turnframe.OutboxDispatching) // still its live sweep's
}
