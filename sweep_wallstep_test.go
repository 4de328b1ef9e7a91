package turnframe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// stepWall returns t as time.Now returns it after the operating system's
// wall clock was stepped by d (NTP, an operator fixing the date, a VM
// resumed): the wall reading moves by d, the monotonic reading does not.
// Go offers no way to build such a value, so the test edits the wall
// seconds of time.Time's documented encoding (time/time.go: with
// hasMonotonic set, bits 30–62 of wall are the seconds since 1885).
func stepWall(t time.Time, d time.Duration) time.Time {
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	p := (*layout)(unsafe.Pointer(&t))
	if p.wall&(1<<63) == 0 {
		panic("stepWall needs a monotonic reading")
	}
	p.wall += uint64(d/time.Second) << 30
	return t
}

// osClock is time.Now on a machine whose wall clock an operator steps.
type osClock struct{ step atomic.Int64 }

func (c *osClock) read() time.Time { return stepWall(time.Now(), time.Duration(c.step.Load())) }

// extendSpy tells of each ExtendClaims, with the now it was given.
type extendSpy struct {
	turnframe.Store
	extended chan time.Time
}

func (s *extendSpy) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	res, err := s.Store.ExtendClaims(ctx, claims, now, lease)
	if err == nil {
		select {
		case s.extended <- now:
		default:
		}
	}
	return res, err
}

// RunOnce's doc: "While RunOnce runs, it extends the lease of every row it
// has not settled yet, in good time, so no release takes a row from a live
// sweep however long its sends take." DESIGN.md §3 "One clock": a sweep's
// lease extensions are "the claim's now plus what the clock says passed
// since" — and with time.Now (the default clock) "what passed since" is
// time.Time.Sub of two monotonic readings, while every lease is stored,
// and judged by Recover/Run's release, on the wall clock. Once the wall
// clock steps forward by more than a lease (an NTP correction, a resumed
// VM), the keeper goes on extending — into the past: each extension ends
// before the wall clock's now, and the next release, in the same process,
// expires the row of the live sweep while its send runs, and the policy
// sends it again beside the running send.
func TestAForwardWallStepNeverLetsAReleaseTakeALiveSweepsRow(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	// The simulation is faithful: the wall moves, the monotonic does not.
	a := clk.read()
	clk.step.Store(int64(time.Hour))
	b := clk.read()
	is.True(b.UTC().Sub(a.UTC()) >= time.Hour)
	is.True(b.Sub(a) < time.Hour)
	clk.step.Store(0)

	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &extendSpy{Store: mem, extended: make(chan time.Time, 1)}
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.SendTimeout = time.Minute
	cfg.LeaseMargin = 20 * time.Millisecond // the keeper extends every 10 ms
	gate := newSendGate()
	d := turnframe.NewDispatcher(store, gate, cfg, turnframe.WithClock(clk.read))
	rec := turnframe.NewRecovery(mem, turnframe.WithClock(clk.read))

	done := make(chan turnframe.DispatchReport, 1)
	go func() {
		r, err := d.RunOnce(context.Background(), clk.read().UTC())
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-gate.started // the send runs

	clk.step.Store(int64(2 * time.Hour)) // the wall clock steps forward two hours
	// Wait for two of the keeper's extensions after the step (the first may
	// have read the clock before it): the lease is now as the live sweep
	// keeps it.
	select {
	case <-store.extended:
	default:
	}
	for range 2 {
		select {
		case now := <-store.extended:
			t.Logf("keeper extended at %v (wall clock now %v)", now, clk.read().UTC())
		case r := <-done:
			t.Fatalf("RunOnce ended early: %+v", r)
		}
	}
	got := dispGet(t, mem, rows[0].ID)
	t.Logf("row: %v, lease until %v; wall clock now %v", got.Status, got.LeaseUntil, clk.read().UTC())

	report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, &apRecorder{})
	is.NoErr(err)
	got = dispGet(t, mem, rows[0].ID)
	close(gate.proceed)
	final := <-done
	t.Logf("RunOnce: %+v; the row is now %v", final, dispGet(t, mem, rows[0].ID).Status)
	is.Equal(len(report.Expired), 0)                  // a live sweep's claim is not expired
	is.Equal(got.Status, turnframe.OutboxDispatching) // still held by the sweep whose send runs
}
