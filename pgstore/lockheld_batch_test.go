package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// slowFirstSettle holds the sweep's first settlement (a slow write: the
// store busy a moment) until released, so the settlements that become
// ready meanwhile are written together, as DESIGN.md §8 says they are.
type slowFirstSettle struct {
	turnframe.Store
	once    sync.Once
	release chan struct{}
}

func (s *slowFirstSettle) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.once.Do(func() { <-s.release })
	return s.Store.Settle(ctx, st)
}

// DESIGN.md §8: the keeper "goes on while a settlement waits, so one row's
// write held up never lets another row's lease end"; "Settlements ready
// together are written in one transaction ...; each keeps its own result";
// "A settlement always lands". TestACompletedSendNeverWaitsOutItsLeaseBehindAnotherRowsLock
// covers globex's settlement written apart from acme's. Here the two are
// ready together and written in one batch: the batch waits on acme's lock
// (another session's), and the keeper leaves both rows alone as settling.
// The try used to be cut at the leases' end and given up whole: globex's
// completed send, on a row nobody locks, was Unsettled under a live
// context, expired, and sent again. A batch that comes back busy or cut is
// now written row by row.
func TestACompletedSendBatchedWithALockedRowIsStillSettled(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		sendTimeout, leaseMargin time.Duration
	}{
		// The try is cut at the leases' end, before lock_timeout.
		{"leases of 3 s, under lock_timeout", 2 * time.Second, time.Second},
		// Each try ends at lock_timeout (5 s, ErrBusy) and is tried again;
		// between tries the keeper's extension of every open row waits on
		// acme's lock too and fails, so globex's lease is never extended,
		// until a try is cut at its end (as with the default 60 s leases).
		{"leases of 12 s, over lock_timeout", 10 * time.Second, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) { batchedWithLocked(t, tt.sendTimeout, tt.leaseMargin) })
	}
}

func batchedWithLocked(t *testing.T, sendTimeout, leaseMargin time.Duration) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	store := mustOpenURL(t, url, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	// In enqueue (claim) order: first, acme (locked), globex, last.
	for _, r := range []struct {
		account turnframe.AccountID
		key     turnframe.IdempotencyKey
	}{{"initech", "i1"}, {"acme", "a1"}, {"globex", "g1"}, {"umbrella", "u1"}} {
		is.NoErr(enqueueRows(ctx, store, ids, r.account, r.key, now, turnframe.OutboxMessage{Destination: "payments"}))
	}
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
	is.NoErr(err)
	is.Equal(len(rows), 4)
	byAccount := map[turnframe.AccountID]turnframe.OutboxID{}
	for _, r := range rows {
		byAccount[r.Account] = r.ID
	}
	spy := &slowFirstSettle{Store: store, release: make(chan struct{})}

	_, tx := lockHolder(t, url)
	var sends sync.Map
	count := func(id turnframe.OutboxID) int32 {
		v, _ := sends.LoadOrStore(id, new(atomic.Int32))
		return v.(*atomic.Int32).Load()
	}
	var releaseOnce sync.Once
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		v, _ := sends.LoadOrStore(e.ID, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch {
		case e.ID == byAccount["acme"] && n == 1:
			// Another session locks acme's row (an operator's SELECT ...
			// FOR UPDATE, a client that died mid-transaction).
			if _, err := tx.Exec(ctx, `SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE`, e.ID.String()); err != nil {
				t.Errorf("lock the row: %v", err)
			}
		case e.ID == byAccount["umbrella"] && n == 1:
			// One sender: acme's and globex's settlements are queued by now.
			releaseOnce.Do(func() { close(spy.release) })
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.Concurrency = 1
	cfg.SendTimeout, cfg.LeaseMargin = sendTimeout, leaseMargin
	d := turnframe.NewDispatcher(spy, sender, cfg)
	report, err := d.RunOnce(ctx, time.Now())
	is.NoErr(err)
	t.Logf("unsettled: %v (acme %v, globex %v)", report.Unsettled, byAccount["acme"], byAccount["globex"])

	row, err := store.GetOutbox(ctx, byAccount["globex"])
	is.NoErr(err)
	t.Logf("globex's row is %v (%s)", row.Status, row.LastCode)
	is.NewRelaxed(t).Equal(row.Status, turnframe.OutboxCompleted) // globex's completed send is recorded as such

	_, err = turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, nopRecoveryHandler{})
	is.NoErr(err)
	_, err = d.RunOnce(ctx, time.Now())
	is.NoErr(err)
	is.Equal(count(byAccount["globex"]), int32(1)) // globex's effect made once
}
