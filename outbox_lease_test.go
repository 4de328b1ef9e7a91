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
// so a release at a time the first lease has ended does not take a row
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
		done := make(chan turnframe.DispatchReport, 1)
		go func() {
			report, err := d.RunOnce(ctx, dispNow)
			if err != nil {
				t.Errorf("run: %v", err)
			}
			done <- report
		}()

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
		released, err := store.ReleaseExpiredClaims(ctx, first)
		is.NoErr(err)              // a release when the first lease has ended
		is.Equal(len(released), 0) // takes nothing from a live sweep
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
// the calls.
type busyStore struct {
	turnframe.Store
	busy  atomic.Int64 // calls still to refuse; negative: refuse every call
	calls atomic.Int64
}

func (s *busyStore) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	s.calls.Add(1)
	if s.busy.Load() != 0 {
		s.busy.Add(-1)
		return nil, fmt.Errorf("busy store: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, settlements)
}

// A settlement the store refuses as busy is tried again until it lands: a
// send whose outcome is known is never left for a release to send again
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
				released, err := inner.ReleaseExpiredClaims(context.Background(), dispNow.Add(24*time.Hour))
				is.NoErr(err)              // release much later
				is.Equal(len(released), 0) // nothing to send again
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
		store := &busyStore{Store: inner}
		store.busy.Store(-1) // busy for good
		ctx, cancel := context.WithCancel(context.Background())
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			cancel() // the application shuts down while the send runs
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.SendTimeout, cfg.LeaseMargin = time.Millisecond, time.Millisecond
		var log dispLog
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(dispLogger(&log)))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                                                // run
		is.Equal(report.Unsettled, []turnframe.OutboxID{rows[0].ID}) // given up
		is.True(store.calls.Load() >= 2)                             // after trying again
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
		is.NoErr(store.Requeue(ctx, rows[0].ID, dispNow.Add(24*time.Hour)))       // an operator requeues it
		is.Equal(drain(dispNow.Add(24*time.Hour)), []string{"retried", "failed"}) // two more, not one
		rec := dispGet(t, store, rows[0].ID)
		is.Equal(rec.Attempts, 4)             // numbers kept rising
		is.Equal(sender.count(rows[0].ID), 4) // four sends in all
	})
}

// ReleaseExpiredClaims takes a claim only once its lease ended, and the
// settlement of the worker that held it is then refused.
func TestDispatcherReleaseTakesOnlyEndedLeases(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		claims, err := store.ClaimDue(ctx, dispNow, 1, "dead", time.Minute)
		is.NoErr(err) // a dispatcher claims, then dies
		d := turnframe.NewDispatcher(store, &dispAnswer{}, turnframe.DefaultDispatchConfig("w1"))
		ids, err := d.ReleaseExpiredClaims(ctx, claims[0].LeaseUntil.Add(-time.Microsecond))
		is.NoErr(err)         // just before its lease ends
		is.Equal(len(ids), 0) // nothing released
		ids, err = d.ReleaseExpiredClaims(ctx, claims[0].LeaseUntil)
		is.NoErr(err)                                   // once it ended
		is.Equal(ids, []turnframe.OutboxID{rows[0].ID}) // released
		err = store.Complete(ctx, claims[0], "late", dispNow.Add(2*time.Minute))
		is.True(errors.Is(err, turnframe.ErrClaimLost)) // the dead worker's settlement is refused
	})
}
