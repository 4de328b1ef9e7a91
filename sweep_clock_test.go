package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// slowClaim is a store whose claim takes `took` by the clock (it waited that
// long for the write lock: SQLite's busy timeout is 5 s by default; on
// PostgreSQL a lock wait), and whose lease keeper cannot extend while two
// rows are open (the store is busy), as keeperRefused.
type slowClaim struct {
	turnframe.Store
	clock *stepClock
	took  time.Duration
}

func (s slowClaim) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	s.clock.set(s.clock.read().Add(s.took)) // the claim returns `took` after the time it was leased from
	return claims, err
}

func (s slowClaim) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if len(claims) > 1 {
		return nil, turnframe.ErrBusy
	}
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

// DESIGN.md §8, Destination limits: "If what is left of its lease would end
// before its send's deadline (the keeper could not extend it while it
// waited), its claim is renewed first; refused, the row is not sent either:
// a send must never outlive the claim it went out under."
//
// The sweep's clock is the claim's now plus the time its clock says passed
// since newSweep — which runs after the claim returned. A claim that took
// 5 s (a busy file) leaves the sweep's clock 5 s behind the clock the lease
// was granted on, for the sweep's whole life. Defaults: SendTimeout 30 s,
// LeaseMargin 30 s, so the claim's lease ends at now+60 s. The waiting row
// gets its place at now+33 s: 27 s of lease are left, less than its 30 s
// send. The sweep reads now+28 s, sees 32 s left, renews nothing and
// sends. At now+61 s the lease has ended while the send still runs (it has
// 2 s to go): recovery expires the row, asks the remote (nothing arrived
// yet) and hands it on — the effect goes out twice.
func TestASlowClaimNeverLetsASendOutliveItsLease(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		clock := newStepClock(dispNow)
		sender := newTwoSends()
		remote, first, second, proceed1, proceed2 := sender.remote, sender.first, sender.second, sender.proceed1, sender.proceed2
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 2, SendTimeout: 30 * time.Second, LeaseMargin: 30 * time.Second,
			DestinationLimits: map[string]int{"bakery": 1}}
		d := turnframe.NewDispatcher(slowClaim{store, clock, 5 * time.Second}, sender, cfg, turnframe.WithClock(clock.read))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := d.RunOnce(ctx, clock.read()); err != nil { // now: the clock's time, as an app passes it
				t.Errorf("run once: %v", err)
			}
		}()
		holder := await(t, first, "the first send holds the place")
		waiter := otherRow(rows, holder)
		is.Equal(dispGet(t, store, waiter).LeaseUntil, dispNow.Add(time.Minute)) // leased from the claim's now
		clock.set(dispNow.Add(33 * time.Second))                                 // 27 s of lease left: less than the 30 s send
		close(proceed1)
		is.Equal(await(t, second, "the waiting row is sent"), waiter)

		clock.set(dispNow.Add(61 * time.Second)) // 28 s into its 30 s send
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read), turnframe.WithDestination("bakery", turnframe.Remote{Verifier: remote.verifier()}))
		_, err := rec.Recover(ctx, turnframe.RecoveryScope{Account: "nobody"}, polNoTurns{t})
		is.NoErr(err)
		got := dispGet(t, store, waiter)
		close(proceed2)
		<-done
		t.Logf("waiter after recovery, mid-send: %v (claim's lease ended at %v)", got.Status, dispNow.Add(time.Minute))
		again := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2"}, turnframe.WithClock(clock.read))
		_, err = again.RunOnce(ctx, clock.read()) // whatever recovery handed on goes out
		is.NoErr(err)
		t.Logf("effects of the waiting row at the remote: %d", remote.count(waiter))
		is.Equal(got.Status, turnframe.OutboxDispatching) // its send is running: the claim must cover it
		is.Equal(remote.count(waiter), 1)                 // one effect
	})
}

// DESIGN.md §8: "A send that goes unknown is settled at the time it ended
// (to the microsecond, never earlier), not at the claim: the policy's
// SettleDelay counts from when the outcome became unknown, so a slow send is
// not looked up while the remote may still be writing it." The same lag:
// a claim that took 5 s (the busy timeout of a busy file) leaves the
// sweep's clock 5 s behind, and a send answered unknown at once is dated
// 5 s before it ended — at the claim. With a SettleDelay of 5 s, recovery
// 2 s after the unknown looks the effect up (the remote does not see it
// yet) and sends it again.
func TestAnUnknownAfterASlowClaimIsDatedWhenTheSendEnded(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0]
		clock := newStepClock(dispNow)
		var ended time.Time
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			ended = clock.read() // answered at once
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.504"}
		})
		d := turnframe.NewDispatcher(slowClaim{store, clock, 5 * time.Second}, sender, turnframe.DispatchConfig{WorkerID: "w1"}, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(ctx, clock.read())
		is.NoErr(err)
		is.Equal(len(report.Unknown), 1)
		is.Equal(ended, dispNow.Add(5*time.Second)) // the send ended 5 s after the claim's now

		var asked int
		verifier := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			asked++ // the remote's lookup lags its writes: it does not see the effect yet
			return turnframe.Verification{Found: turnframe.FoundNotHappened}
		})
		clock.set(ended.Add(2 * time.Second)) // 2 s after the outcome became unknown
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: verifier, SettleDelay: 5 * time.Second}))
		rep, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		got := policyFor(t, rep, turnframe.OutboxSubject(rtAccount, row.ID))
		t.Logf("policy: %v, next at %v (the send ended at %v)", got.Outcome, got.NextAt, ended)
		is.Equal(asked, 0)                             // not looked up inside the settle delay
		is.Equal(got.Outcome, turnframe.PolicyWaiting) // it waits the delay from when it became unknown
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown)
	})
}
