package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

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

			blocker, err := pgx.Connect(ctx, url)
			is.NoErr(err)
			defer blocker.Close(context.Background())
			tx, err := blocker.Begin(ctx)
			is.NoErr(err)
			defer tx.Rollback(context.Background())
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
