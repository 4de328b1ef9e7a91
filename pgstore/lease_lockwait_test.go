package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Execute writes a handler's outcome past the caller's context, so that an
// answer known only in memory lands (DESIGN.md §4). Each try is bounded by
// what is left of the attempt's lease: a write that waits for a lock
// another session keeps — an application's own transaction left open on
// the turn's row — returns once the lease ran out, instead of waiting for
// ever with no context left to end it.
func TestAnOutcomeWaitingForALockEndsWithItsLease(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := mustOpenURL(t, url)
	rt := turnframe.New(s, turnframe.WithCommandTimeout(time.Second), turnframe.WithLeaseMargin(time.Second))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "pay"}}})
	is.NoErr(err)

	_, tx := lockHolder(t, url)
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		// Meanwhile the app opens a transaction on the turn's row and
		// leaves it open.
		_, err := tx.Exec(ctx, `UPDATE turns SET updated_at = updated_at WHERE id = $1`, turn.String())
		is.NoErr(err)
		return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "paid"}})
	})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(ctx, "acme", turn, h)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("Execute: %v", err)
		is.True(err != nil) // the outcome could not be written while the lock was held
	case <-time.After(time.Minute): // a safety net, far past the 2 s lease
		t.Fatal("Execute still waits for a lock its lease ended under")
	}
}

// extendSpy tells extending once the keeper first tries to extend a lease.
type extendSpy struct {
	turnframe.Store
	once      sync.Once
	extending chan struct{}
}

func (s *extendSpy) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.once.Do(func() { close(s.extending) })
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

// A dispatcher writes a settlement, and extends its leases, past the
// caller's context, so that a send that happened is recorded (DESIGN.md
// §8). Each write is bounded by what is left of the rows' leases: once the
// app shut down, a write waiting for a lock another session keeps on the
// row — a transaction left open — ends with the lease, and RunOnce
// returns, instead of waiting for ever with no context left to end it.
func TestADispatcherWriteWaitingForALockEndsWithItsLease(t *testing.T) {
	tests := []struct {
		name string
		// waitForKeeper makes the send wait until the lease keeper tries
		// to extend the locked row's lease.
		waitForKeeper bool
	}{
		{name: "the settlement waits"},
		{name: "an extension waits", waitForKeeper: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			url := pgtest.Schema(t)
			spy := &extendSpy{Store: mustOpenURL(t, url), extending: make(chan struct{})}
			is.NoErr(enqueueRows(ctx, spy, turnframe.NewIDGenerator(), "acme", "k1", time.Now(), turnframe.OutboxMessage{Destination: "payments"}))

			_, tx := lockHolder(t, url)
			runCtx, shutDown := context.WithCancel(ctx)
			defer shutDown()
			sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
				// Meanwhile another session locks the row and keeps its
				// transaction open, and the app shuts down.
				if _, err := tx.Exec(ctx, `UPDATE outbox SET key = key WHERE id = $1`, e.ID.String()); err != nil {
					t.Errorf("lock the row: %v", err)
				}
				if tt.waitForKeeper {
					<-spy.extending
				}
				shutDown()
				return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
			})
			cfg := turnframe.DefaultDispatchConfig("w1")
			cfg.SendTimeout, cfg.LeaseMargin = 2*time.Second, time.Second // leases of 3 s, extended every 500 ms
			d := turnframe.NewDispatcher(spy, sender, cfg)
			done := make(chan turnframe.DispatchReport, 1)
			go func() {
				report, err := d.RunOnce(runCtx, time.Now())
				if err != nil {
					t.Errorf("run once: %v", err)
				}
				done <- report
			}()
			select {
			case report := <-done:
				is.Equal(len(report.Unsettled), 1) // given up once the lease ended
			case <-time.After(time.Minute): // a safety net, far past the 3 s lease
				t.Fatal("RunOnce still waits for a lock its rows' leases ended under")
			}
		})
	}
}
