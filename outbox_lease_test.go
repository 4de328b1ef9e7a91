package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// RunOnce extends the leases of the rows it has not settled while it runs,
// so an expiry at a time the first lease has ended does not take a row
// whose send is still running (issue 11, item 5).
func TestRunOnceKeepsTheLeasesOfRowsInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", dispMessages(2, "payments", "")...)
		proceed := make(chan struct{})
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			<-proceed // a slow send: far longer than a lease margin
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("a")
		cfg.SendTimeout, cfg.LeaseMargin = time.Hour, 2*time.Millisecond
		d := turnframe.NewDispatcher(store, sender, cfg)
		done := runOnceAsync(t, d, ctx, dispNow)

		// Wait until both leases were extended past where the claim put
		// them, and the second (not sent yet, Concurrency 1) too.
		first := dispNow.Add(cfg.Lease())
		giveUp := time.Now().Add(10 * time.Second) // a safety net: a keeper that never extends fails here
		for _, r := range rows {
			for !dispGet(t, store, r.ID).LeaseUntil.After(first) {
				if time.Now().After(giveUp) {
					close(proceed)
					t.Fatalf("row %v: its lease was never extended past %v", r.ID, first)
				}
				runtime.Gosched()
			}
		}
		expired, err := store.ExpireClaims(ctx, first)
		is.NoErr(err)             // an expiry when the first lease has ended
		is.Equal(len(expired), 0) // takes nothing from a live sweep
		for _, r := range rows {
			is.Equal(dispGet(t, store, r.ID).Status, turnframe.OutboxDispatching) // still the sweep's
		}
		close(proceed)
		report := <-done
		is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID, rows[1].ID}) // both settled by their sender
		for _, r := range rows {
			rec := dispGet(t, store, r.ID)
			is.Equal(rec.Attempts, 1)        // sent once
			is.True(rec.LeaseUntil.IsZero()) // no lease once settled
		}
	})
}

// busyStore answers ErrBusy to the first busy calls of Settle, as a SQLite
// file another process holds locked past the busy timeout does, and counts
// the calls. onCall, when set, runs first in each call with its number.
type busyStore struct {
	turnframe.Store
	busy   atomic.Int64 // calls still to refuse; negative: refuse every call
	calls  atomic.Int64
	onCall func(n int64)
}

func (s *busyStore) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	n := s.calls.Add(1)
	if s.onCall != nil {
		s.onCall(n)
	}
	if s.busy.Load() != 0 {
		s.busy.Add(-1)
		return nil, fmt.Errorf("busy store: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, settlements)
}

// busyForGood is a busyStore that refuses lease extensions too, as a store
// busy for good does. Without it the keeper, taking the test's clock moving
// two hours for a forward step of the wall clock, extended the lease to
// where it ends on the real clock, and on a clock that never moves again
// the sweep tried its settlement for ever (a CI run timed out there).
type busyForGood struct{ *busyStore }

func (busyForGood) ExtendClaims(context.Context, []turnframe.Claim, time.Time, time.Duration) ([]error, error) {
	return nil, fmt.Errorf("busy store: %w", turnframe.ErrBusy)
}

// A settlement the store refuses as busy is tried again until it lands: a
// send whose outcome is known is never left for an expiry to make unknown
// (issue 11, item 4).
func TestASettlementRefusedAsBusyIsTriedAgain(t *testing.T) {
	outcomes := []turnframe.Dispatched{
		{Kind: turnframe.DispatchCompleted, Code: "http.200"},
		{Kind: turnframe.DispatchUnknown, Code: "http.timeout"},
	}
	for _, out := range outcomes {
		t.Run(out.Kind.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, inner turnframe.Store) {
				is := is.New(t)
				rows := dispEnqueue(t, inner, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				store := &busyStore{Store: inner}
				store.busy.Store(3)
				sender := &dispAnswer{out: out}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
				report, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)                          // run
				is.Equal(report.Unsettled, nil)        // nothing left unsettled
				is.Equal(store.calls.Load(), int64(4)) // three refusals, then the write
				is.Equal(sender.count(rows[0].ID), 1)  // sent once
				rec := dispGet(t, inner, rows[0].ID)
				is.Equal(rec.LastCode, out.Code) // settled as the send said
				expired, err := inner.ExpireClaims(context.Background(), dispNow.Add(24*time.Hour))
				is.NoErr(err)             // expire much later
				is.Equal(len(expired), 0) // nothing left claimed
			})
		})
	}
}

// A sweep gives a busy store up only when its caller's context has ended and
// the rows' leases have ended too; the row is then reported unsettled and
// its send's outcome is logged at error level, for an operator.
func TestASweepGivesUpABusyStoreOnlyOnceItsContextAndLeasesEnded(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		// The lease ends only when the clock moves, and it moves during the
		// second refused write: the first refusal must be tried again
		// however slow the machine, and the second is the last.
		clock := newStepClock(dispNow)
		store := &busyStore{Store: inner, onCall: func(n int64) {
			if n == 2 {
				clock.set(dispNow.Add(2 * time.Hour)) // past the lease of an hour and a millisecond
			}
		}}
		store.busy.Store(-1) // busy for good
		ctx, cancel := context.WithCancel(context.Background())
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			cancel() // the application shuts down while the send runs
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		// The send's deadline is far off, so the sender's cancel always comes
		// before its settlement's first write: with 1 ms, a deadline that
		// passed before the sender ran settled the row while the context
		// still lived, and the settler went on trying (and its keeper on
		// extending) past the second write.
		cfg.SendTimeout, cfg.LeaseMargin = time.Hour, time.Millisecond
		var log dispLog
		d := turnframe.NewDispatcher(busyForGood{store}, sender, cfg, turnframe.WithLogger(dispLogger(&log)), turnframe.WithClock(clock.read))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                                                // run
		is.Equal(report.Unsettled, []turnframe.OutboxID{rows[0].ID}) // given up
		is.Equal(store.calls.Load(), int64(2))                       // tried again while the lease lasted, then given up
		is.True(strings.Contains(log.String(), "level=ERROR msg=\"turnframe: outbox row could not be settled"))
		is.True(strings.Contains(log.String(), rows[0].ID.String())) // naming the row
	})
}

// With Concurrency above 1, the rows of one batch are sent at once (issue
// 12, item 7): each send here waits until all four are in flight, which
// one-at-a-time sends never reach.
func TestConcurrencySendsTheRowsOfABatchAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		const n = 4
		dispEnqueue(t, store, "acme", "k1", dispMessages(n, "payments", "")...)
		var mu sync.Mutex
		inFlight := 0
		allIn := make(chan struct{})
		sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			inFlight++
			if inFlight == n {
				close(allIn)
			}
			mu.Unlock()
			select {
			case <-allIn:
				return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
			case <-ctx.Done(): // never all in flight: the test fails, it does not hang
				return turnframe.Dispatched{Kind: turnframe.DispatchUnknown}
			}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency, cfg.SendTimeout = n, 5*time.Second
		d := turnframe.NewDispatcher(store, sender, cfg)
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)                      // run
		is.Equal(len(report.Completed), n) // every send saw the others in flight
	})
}

// A row failed with its attempts spent and requeued gets a full attempt
// budget again, while its attempt numbers keep rising (issue 11, item 9).
func TestARequeuedRowGetsAFullAttemptBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.MaxAttempts = 2
		d := turnframe.NewDispatcher(store, sender, cfg)
		drain := func(now time.Time) []string {
			var fates []string
			for range 5 {
				report, err := d.RunOnce(ctx, now)
				is.NoErr(err) // run
				switch {
				case len(report.Retried) == 1:
					fates = append(fates, "retried")
				case len(report.Failed) == 1:
					return append(fates, "failed")
				}
				now = now.Add(time.Hour)
			}
			return fates
		}
		is.Equal(drain(dispNow), []string{"retried", "failed"}) // two attempts
		is.Equal(dispGet(t, store, rows[0].ID).LastCode, turnframe.CodeAttemptsExhausted)
		is.NoErr(store.Requeue(ctx, rows[0].ID, 0, dispNow.Add(24*time.Hour)))    // an operator requeues it
		is.Equal(drain(dispNow.Add(24*time.Hour)), []string{"retried", "failed"}) // two more, not one
		rec := dispGet(t, store, rows[0].ID)
		is.Equal(rec.Attempts, 4)             // numbers kept rising
		is.Equal(sender.count(rows[0].ID), 4) // four sends in all
	})
}

// Recover expires a claim only once its lease ended: the row becomes
// outcome unknown (its send may have started) and the settlement of the
// worker that held it is refused. The policy of its destination then
// decides whether it is sent again: with no Remote declared it is, under
// the same key (at least once, as before policies existed); a remote that
// can neither be asked nor deduplicate leaves it to a person.
func TestRecoverExpiresOnlyEndedLeases(t *testing.T) {
	tests := []struct {
		name    string
		opts    []turnframe.Option
		outcome turnframe.PolicyOutcome
		status  turnframe.OutboxStatus
		trail   []string // the row's audit trail after its enqueue and its claim
		sends   []turnframe.IdempotencyKey
	}{
		{"no Remote declared: sent again under the same key", nil,
			turnframe.PolicyResent, turnframe.OutboxPending,
			[]string{
				"dispatching>outcome_unknown recovery " + turnframe.CodeLeaseEnded,
				"outcome_unknown>pending policy " + turnframe.CodeUndeclaredResend,
			},
			[]turnframe.IdempotencyKey{"k1"}},
		{"a remote that can do neither: a person decides",
			[]turnframe.Option{turnframe.WithDestination("payments", turnframe.Remote{})},
			turnframe.PolicyEscalated, turnframe.OutboxNeedsIntervention,
			[]string{
				"dispatching>outcome_unknown recovery " + turnframe.CodeLeaseEnded,
				"outcome_unknown>needs_intervention policy " + turnframe.CodeNoSafeResolution,
			},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				subject := turnframe.OutboxSubject("acme", rows[0].ID)
				claims, err := store.ClaimDue(ctx, dispNow, 1, "dead", time.Minute)
				is.NoErr(err) // a dispatcher claims, then dies
				end := claims[0].LeaseUntil
				clock := newStepClock(end.Add(-time.Microsecond))
				r := turnframe.NewRecovery(store, append([]turnframe.Option{turnframe.WithClock(clock.read)}, tt.opts...)...)

				report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
				is.NoErr(err)                                                               // just before its lease ends
				is.Equal(len(report.Expired), 0)                                            // nothing expired
				is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxDispatching) // the claim holds

				clock.set(end)
				report, err = r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
				is.NoErr(err)                                               // once it ended
				is.Equal(report.Expired, []turnframe.OutboxID{rows[0].ID})  // expired
				is.Equal(policyFor(t, report, subject).Outcome, tt.outcome) // and handed to the policy
				is.Equal(dispGet(t, store, rows[0].ID).Status, tt.status)   // which moved it
				is.Equal(histLines(t, store, subject), append([]string{
					">pending app", "pending>dispatching worker:dead",
				}, tt.trail...)) // every move in the audit trail, with who made it

				err = turnframe.CompleteClaim(ctx, store, claims[0], "late", end)
				is.True(errors.Is(err, turnframe.ErrClaimLost)) // the dead worker's settlement is refused

				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
				_, err = d.RunOnce(ctx, end.Add(time.Hour))
				is.NoErr(err)                    // a live dispatcher
				is.Equal(sender.order, tt.sends) // sends it again only where the policy said so
			})
		})
	}
}
