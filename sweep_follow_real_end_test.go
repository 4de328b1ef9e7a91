package turnframe_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// slowExtendStore stands for a slow store: its first Settle takes a
// while, then tells of it on held and waits for let; each ExtendClaims
// takes a while, and the nows it is given with a full lease are kept.
type slowExtendStore struct {
	turnframe.Store
	slow  time.Duration
	lease time.Duration
	held  chan struct{}
	let   chan struct{}
	first atomic.Bool

	mu   sync.Mutex
	nows []time.Time // the nows of the extensions by a full lease
}

func (s *slowExtendStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	if s.first.CompareAndSwap(false, true) {
		<-time.After(s.slow) // a slow write: real time passes since the claim
		s.held <- struct{}{}
		<-s.let
	}
	return s.Store.Settle(ctx, st)
}

func (s *slowExtendStore) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	<-time.After(s.slow / 2) // a slow store: real time passes during the call (within the second pastCaller leaves it)
	res, err := s.Store.ExtendClaims(ctx, claims, now, lease)
	if err == nil && lease == s.lease {
		s.mu.Lock()
		s.nows = append(s.nows, now)
		s.mu.Unlock()
	}
	return res, err
}

func (s *slowExtendStore) lastNow() (last time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, now := range s.nows {
		if now.After(last) {
			last = now
		}
	}
	return last, len(s.nows)
}

// outbox_sweep.go, followStep: a row of a sweep whose caller's context
// ended "is extended to what its lease had left on the real clock, never
// further". Its lease was last extended at now, for a lease, after a step
// of an hour (extendSettling); after a second step of an hour it must end
// at now + lease + 1h on the stepped clock: later and Run's release would
// wait past the real end for a row its sweep no longer keeps, sooner and
// the step would cut the lease its settlement is written under. The store
// is slow, so real time passes between the claim, the extension's clock
// reading, its answer, and the second step: a lease reckoned from any of
// those but the reading is seconds off.
func TestAnEndedSweepFollowsAStepToItsLeasesRealEndNeverFurther(t *testing.T) {
	is := is.New(t)
	const slow = time.Second                 // a settlement's wait; an extension takes half of it
	const tolerance = 200 * time.Millisecond // the real end is exact; this is for reading the clocks
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	cfg := runConfig()
	store := &slowExtendStore{Store: mem, slow: slow, lease: cfg.Lease(), held: make(chan struct{}), let: make(chan struct{})}
	sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
	d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runOnceAsync(t, d, ctx, clk.read().UTC())
	<-store.held // the send completed; its settlement is being written

	clk.step.Store(int64(time.Hour)) // a first step: the live sweep extends the settling row's lease
	is.NoErr(turnframe.Release(context.Background(), d))
	extNow, n := store.lastNow()
	is.True(n >= 1) // the settling row's lease was extended after the step

	cancel()                             // the caller's context ends: the lease is no longer extended
	clk.step.Store(int64(2 * time.Hour)) // a second step of an hour
	is.NoErr(turnframe.Release(context.Background(), d))
	got := dispGet(t, mem, rows[0].ID)
	close(store.let)
	sent := <-done

	want := extNow.Add(cfg.Lease()).Add(time.Hour) // the real end, on the twice stepped clock
	off := got.LeaseUntil.Sub(want)
	t.Logf("extended at %v; lease until %v, its real end %v: off by %v; report %+v", extNow, got.LeaseUntil, want, off, sent)
	is.Equal(got.Status, turnframe.OutboxDispatching)          // the release left the row to its sweep
	is.True(off > -tolerance)                                  // the step did not cut the lease short
	is.True(off < tolerance)                                   // nor was it extended past its real end
	is.Equal(sent.Completed, []turnframe.OutboxID{rows[0].ID}) // and its settlement landed
}

// heldSlowClaim stands for a store whose claims take a while; its first Settle
// tells of it on held and waits for let, as heldSettle.
type heldSlowClaim struct {
	*heldSettle
	slow time.Duration
}

func (s *heldSlowClaim) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	<-time.After(s.slow) // a slow claim: real time passes between the clock's reading and the claims
	return s.heldSettle.ClaimDue(ctx, now, limit, worker, lease)
}

// Dispatcher.claimLive: "the leases run from that reading, however long
// the claim takes". A row never extended, of a sweep whose caller's
// context ended, follows a step of the wall clock to where its lease ends
// on the real clock: now + lease from the claim's reading, however slow
// the claim was, not from when the claim answered.
func TestAnEndedSweepFollowsAStepToTheLeaseFromItsClaimsReading(t *testing.T) {
	is := is.New(t)
	const slow = time.Second
	const tolerance = 250 * time.Millisecond
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	cfg := runConfig()
	store := &heldSlowClaim{heldSettle: &heldSettle{Store: mem, held: make(chan struct{}), let: make(chan struct{})}, slow: slow}
	sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
	d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := clk.read().UTC()
	done := runOnceAsync(t, d, ctx, now)
	<-store.held // the send completed; its settlement is being written
	cancel()
	clk.step.Store(int64(2 * time.Hour))
	is.NoErr(turnframe.Release(context.Background(), d))
	got := dispGet(t, mem, rows[0].ID)
	close(store.let)
	sent := <-done

	want := now.Add(cfg.Lease()).Add(2 * time.Hour)
	off := got.LeaseUntil.Sub(want)
	t.Logf("claimed at %v; lease until %v, its real end %v: off by %v; report %+v", now, got.LeaseUntil, want, off, sent)
	is.Equal(got.Status, turnframe.OutboxDispatching) // the release left the row to its sweep
	is.True(off > -tolerance)                         // the step did not cut the lease short
	is.True(off < tolerance)                          // nor was it extended past its real end
	is.Equal(sent.Completed, []turnframe.OutboxID{rows[0].ID})
}

// busyAfterHold's first Settle tells of it on held, waits for let, and is
// then busy (a lock wait refused); the next ones go to the store.
type busyAfterHold struct {
	turnframe.Store
	held  chan struct{}
	let   chan struct{}
	first atomic.Bool
}

func (s *busyAfterHold) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	if s.first.CompareAndSwap(false, true) {
		s.held <- struct{}{}
		<-s.let
		return nil, turnframe.ErrBusy
	}
	return s.Store.Settle(ctx, st)
}

// A sweep whose caller's context ended writes a settlement refused as busy
// again while its leases hold (DESIGN §8). Its lease, followed across a
// step to its real end (followStep), holds: the settlement is written
// again and lands, not given up as if the step had ended the lease.
func TestAnEndedSweepsSettlementIsWrittenAgainUnderTheLeaseItFollowed(t *testing.T) {
	is := is.New(t)
	clk := &osClock{}
	mem := memstoreFor(t)
	rows := dispEnqueue(t, mem, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
	store := &busyAfterHold{Store: mem, held: make(chan struct{}), let: make(chan struct{})}
	sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}}
	d := turnframe.NewDispatcher(store, sender, runConfig(), turnframe.WithClock(clk.read))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runOnceAsync(t, d, ctx, clk.read().UTC())
	<-store.held // the send completed; its settlement is being written
	cancel()
	clk.step.Store(int64(2 * time.Hour))
	is.NoErr(turnframe.Release(context.Background(), d)) // the row's lease follows the step
	close(store.let)                                     // the try is refused as busy
	sent := <-done
	t.Logf("report %+v", sent)
	is.Equal(sent.Completed, []turnframe.OutboxID{rows[0].ID}) // written again under the lease it still holds
	is.Equal(dispGet(t, mem, rows[0].ID).Status, turnframe.OutboxCompleted)
}
