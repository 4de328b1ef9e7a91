package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// behindLockSpy watches the sweep's writes. It says when the locked row's
// settlement started (lockedSettling) and ended; at the first write of
// the other row after that (its settlement, or the keeper's extension,
// whichever comes first) another process's release lands first, as it may
// at any instant once a lease ended: the session holding the lock goes
// (the server noticed its client died), and ExpireClaims runs.
type behindLockSpy struct {
	turnframe.Store
	locked, other   turnframe.OutboxID
	lockedSettling  chan struct{} // closed when the first write holding the locked row starts
	lockedReturned  chan struct{} // closed when it returned
	lockedDone      atomic.Bool
	once, startOnce sync.Once
	unlock          func()
	expired         []turnframe.OutboxID
}

func has(ids []turnframe.OutboxID, id turnframe.OutboxID) bool { return slices.Contains(ids, id) }

func (s *behindLockSpy) releaseLands(ids []turnframe.OutboxID) {
	if !s.lockedDone.Load() || !has(ids, s.other) {
		return
	}
	s.once.Do(func() {
		s.unlock()
		got, err := s.Store.ExpireClaims(context.Background(), time.Now())
		if err != nil {
			panic(err)
		}
		s.expired = got
	})
}

func (s *behindLockSpy) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	var ids []turnframe.OutboxID
	for _, x := range st {
		ids = append(ids, x.Claim.ID)
	}
	s.releaseLands(ids)
	defer s.watchLocked(ids)()
	return s.Store.Settle(ctx, st)
}

// watchLocked marks the start of the first write holding the locked row,
// and returns what marks its end.
func (s *behindLockSpy) watchLocked(ids []turnframe.OutboxID) func() {
	first := false
	if has(ids, s.locked) {
		s.startOnce.Do(func() { first = true; close(s.lockedSettling) })
	}
	return func() {
		if first {
			s.lockedDone.Store(true)
			close(s.lockedReturned)
		}
	}
}

func (s *behindLockSpy) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	var ids []turnframe.OutboxID
	for _, c := range claims {
		ids = append(ids, c.ID)
	}
	s.releaseLands(ids)
	defer s.watchLocked(ids)()
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

// DESIGN.md §8: "Leases. While RunOnce runs, a keeper extends the lease of
// every row it has not settled, every LeaseMargin/2", "each keeps its own
// result" and "A settlement always lands". Two rows of two tenants are
// claimed together; acme's is locked by another session right after its
// claim (an operator's SELECT ... FOR UPDATE, a client that died
// mid-transaction). globex's send completes at once, seconds before its
// lease ends. Its settlement must land: a write waiting on acme's lock
// must not keep the keeper from globex's lease until it ends, when a
// release (another process's Recovery.Run) may take the row, the completed
// settlement be refused as ErrClaimLost, and the policy of an undeclared
// destination send it again — one effect made twice because of a lock on
// another tenant's row.
//
// "acme's settlement waits": the write that waits is acme's settlement
// (the keeper used to wait for the settler). "the keeper's extension
// waits": it is the keeper's extension of both rows, while acme's send
// still runs, and globex's settlement waits for it.
func TestACompletedSendNeverWaitsOutItsLeaseBehindAnotherRowsLock(t *testing.T) {
	for _, keeperWaits := range []bool{false, true} {
		name := "acme's settlement waits"
		if keeperWaits {
			name = "the keeper's extension waits"
		}
		t.Run(name, func(t *testing.T) { completedBehindLock(t, keeperWaits) })
	}
}

func completedBehindLock(t *testing.T, keeperWaits bool) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	if keeperWaits {
		// An extension of both rows holds globex's lock while it waits on
		// acme's, until lock_timeout: 1 s here, well under the 3 s leases,
		// as DefaultLockTimeout's 5 s are under the default leases of 60 s.
		// (acme's settlement waits longer than the leases, at the default:
		// the keeper, which leaves a row being settled alone, goes on
		// extending globex's meanwhile.)
		url = pgtest.WithParams(t, url, map[string][]string{"lock_timeout": {"1000"}})
	}
	store := mustOpenURL(t, url, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	is.NoErr(enqueueRows(ctx, store, ids, "acme", "a1", now, turnframe.OutboxMessage{Destination: "payments"}))
	is.NoErr(enqueueRows(ctx, store, ids, "globex", "g1", now, turnframe.OutboxMessage{Destination: "payments"}))
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
	is.NoErr(err)
	is.Equal(len(rows), 2)
	spy := &behindLockSpy{Store: store, lockedSettling: make(chan struct{}), lockedReturned: make(chan struct{})}
	for _, r := range rows {
		if r.Account == "acme" {
			spy.locked = r.ID
		} else {
			spy.other = r.ID
		}
	}

	_, tx := lockHolder(t, url)
	// The holder's session is used from the sender and from the spy, on
	// goroutines the race detector cannot see ordered by the server's
	// lock: txMu orders them.
	var txMu sync.Mutex
	spy.unlock = func() {
		txMu.Lock()
		defer txMu.Unlock()
		_ = tx.Rollback(context.Background())
	}

	var sends sync.Map // row id -> *atomic.Int32
	count := func(id turnframe.OutboxID) int32 {
		v, _ := sends.LoadOrStore(id, new(atomic.Int32))
		return v.(*atomic.Int32).Load()
	}
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		v, _ := sends.LoadOrStore(e.ID, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		if e.ID == spy.locked && n == 1 {
			// Right after the claim, another session locks acme's row.
			txMu.Lock()
			_, err := tx.Exec(ctx, `SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE`, e.ID.String())
			txMu.Unlock()
			if err != nil {
				t.Errorf("lock the row: %v", err)
			}
			if keeperWaits {
				<-spy.lockedReturned // acme's send runs on while the keeper's extension waits
			}
		}
		if e.ID == spy.other && n == 1 {
			<-spy.lockedSettling // globex's send answers once acme's settlement waits
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.Concurrency = 2
	cfg.SendTimeout, cfg.LeaseMargin = 2*time.Second, time.Second // leases of 3 s, extended every 500 ms
	d := turnframe.NewDispatcher(spy, sender, cfg)
	_, err = d.RunOnce(ctx, time.Now())
	is.NoErr(err)
	is.Equal(count(spy.other), int32(1))

	row, err := store.GetOutbox(ctx, spy.other)
	is.NoErr(err)
	t.Logf("the release that landed expired %v; globex's row is %v (%s)", spy.expired, row.Status, row.LastCode)
	// globex's send answered Completed seconds before its lease ended.
	is.NewRelaxed(t).Equal(row.Status, turnframe.OutboxCompleted) // globex's completed send is recorded as such

	// What follows: recovery hands the unknown row to the policy, which
	// sends it again.
	_, err = turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, nopRecoveryHandler{})
	is.NoErr(err)
	_, err = d.RunOnce(ctx, time.Now())
	is.NoErr(err)
	is.Equal(count(spy.other), int32(1)) // globex's effect made once
}
