package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// keeperRefused refuses as busy every lease extension of more than one
// claim (the keeper's, while two rows are open) and, when alone is set,
// of one claim too (a renewal before a send).
type keeperRefused struct {
	turnframe.Store
	alone bool
}

func (k keeperRefused) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if len(claims) > 1 || k.alone {
		return nil, turnframe.ErrBusy
	}
	return k.Store.ExtendClaims(ctx, claims, now, lease)
}

// effects is a remote that takes each send as one effect and, asked, says
// whether the effect of a row has arrived.
type effects struct {
	mu  sync.Mutex
	got map[turnframe.OutboxID]int
}

func (e *effects) land(id turnframe.OutboxID) { e.mu.Lock(); e.got[id]++; e.mu.Unlock() }
func (e *effects) count(id turnframe.OutboxID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got[id]
}

// verifier is the remote's lookup: a row's effect happened once it landed.
func (e *effects) verifier() turnframe.Verifier {
	return turnframe.VerifierFunc(func(_ context.Context, u turnframe.Uncertain) turnframe.Verification {
		e.mu.Lock()
		defer e.mu.Unlock()
		for id, n := range e.got {
			if id.String() == u.Subject.Ref && n > 0 {
				return turnframe.Verification{Found: turnframe.FoundHappened}
			}
		}
		return turnframe.Verification{Found: turnframe.FoundNotHappened}
	})
}

// twoSends is a Sender whose first send announces its row on first and
// waits for proceed1 (it holds its destination's one place), whose second
// announces its row on second and waits for proceed2, and whose later
// sends go straight through; each send lands one effect at remote when it
// ends, and completes.
type twoSends struct {
	remote             *effects
	first, second      chan turnframe.OutboxID
	proceed1, proceed2 chan struct{}
	mu                 sync.Mutex
	n                  int
}

func newTwoSends() *twoSends {
	return &twoSends{remote: &effects{got: map[turnframe.OutboxID]int{}},
		first: make(chan turnframe.OutboxID, 1), second: make(chan turnframe.OutboxID, 1),
		proceed1: make(chan struct{}), proceed2: make(chan struct{})}
}

func (s *twoSends) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	s.mu.Lock()
	s.n++
	k := s.n
	s.mu.Unlock()
	switch k {
	case 1:
		s.first <- e.ID
		<-s.proceed1
	case 2:
		s.second <- e.ID // the waiting row's send has started
		<-s.proceed2     // …and is on its way
	}
	s.remote.land(e.ID)
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// A row waits for its destination's place (DestinationLimits 1) while the
// keeper cannot extend the sweep's leases. The place frees 10 ms before the
// row's lease ends, with the send's deadline (SendTimeout, an hour) far
// past it. Sent on that claim, recovery could expire the row while the send
// still runs, ask the remote (nothing arrived yet) and hand it on: two
// sends of one effect at a remote that does not deduplicate (found by the
// sixth outside attack; RELIABILITY §16). The row is sent only once its
// claim is renewed to cover the send; a store that refuses the renewal
// gets it back unsent.
func TestARowThatWaitedIsSentOnlyUnderALeaseThatCoversItsSend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused bool // the renewal of the waiting row is refused too
	}{
		{"the store renews the claim", false},
		{"the store refuses the renewal", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				leaseCoverRun(t, store, tc.refused)
			})
		})
	}
}

func leaseCoverRun(t *testing.T, store turnframe.Store, refused bool) {
	is := is.New(t)
	ctx := context.Background()
	rows := dispEnqueue(t, store, rtAccount, "k1", dispMessages(2, "bakery", "")...)
	clock := newStepClock(dispNow)
	sender := newTwoSends()
	remote, first, second, proceed1, proceed2 := sender.remote, sender.first, sender.second, sender.proceed1, sender.proceed2
	cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 2, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond,
		DestinationLimits: map[string]int{"bakery": 1}}
	d := turnframe.NewDispatcher(keeperRefused{store, refused}, sender, cfg, turnframe.WithClock(clock.read))
	done := runOnceAsync(t, d, ctx, dispNow)
	holder := await(t, first, "the first send holds the place")
	waiter := otherRow(rows, holder)
	clock.set(dispNow.Add(time.Hour)) // the claim's lease (an hour and 10 ms) has 10 ms left
	close(proceed1)                   // the place frees
	select {
	case id := <-second:
		is.True(!refused) // sent although its lease could not cover the send
		is.Equal(id, waiter)
	case report := <-done:
		is.True(refused) // not sent although the store renewed its claim
		close(proceed2)
		is.Equal(len(report.Completed), 1)                                  // the holder only
		is.Equal(report.Retried, []turnframe.OutboxID{waiter})              // the waiter, put back
		is.Equal(dispGet(t, store, waiter).Status, turnframe.OutboxPending) // put back unsent
		is.Equal(dispGet(t, store, waiter).LastCode, turnframe.CodeNotSent)
		is.Equal(remote.count(waiter), 0)
		return
	}

	clock.set(dispNow.Add(90 * time.Minute)) // the claim's first lease ended while the send runs
	rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read), turnframe.WithDestination("bakery", turnframe.Remote{Verifier: remote.verifier()}))
	_, err := rec.Recover(ctx, turnframe.RecoveryScope{Account: "nobody"}, polNoTurns{t})
	is.NoErr(err)
	is.Equal(dispGet(t, store, waiter).Status, turnframe.OutboxDispatching) // the renewed lease holds: recovery leaves it alone
	close(proceed2)
	await(t, done, "RunOnce returns")
	is.Equal(remote.count(waiter), 1) // one effect
	is.Equal(dispGet(t, store, waiter).Status, turnframe.OutboxCompleted)
}
