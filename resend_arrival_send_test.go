package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// arrSlowStore is a store whose first claim and first lease extension
// each take a while on the test's clock: what a busy database does to a
// sweep between its claim and its send.
type arrSlowStore struct {
	turnframe.Store
	clock             *polClock
	claim, extend     time.Duration
	mu                sync.Mutex
	claimed, extended bool
}

func (s *arrSlowStore) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	s.once(&s.claimed, s.claim)
	return claims, err
}

func (s *arrSlowStore) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.once(&s.extended, s.extend)
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

func (s *arrSlowStore) once(done *bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !*done {
		*done = true
		s.clock.Add(d)
	}
}

// A Dispatcher claims the policy's resend of a row with a second more
// than SendTimeout left of its window by the time it looks, but its claim's
// lease no longer covers the send (the claim was slow), and the renewal
// takes two seconds more: the send would start with less than SendTimeout
// left and could reach the remote after it forgot the key. The window is
// judged after the renewal, the last thing before the send: withheld.
func TestAnOutboxResendWhoseRenewalMakesItLateIsWithheld(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		declared := turnframe.Remote{Deduplicates: arrWindow}
		row := polUnknownRow(t, store, "k1", "payments")
		clock := newPolClock(dispNow)
		remote := newArrRemote(clock)
		remote.receive(string(row.Key)) // the first send landed, its answer was lost
		clock.Add(time.Minute)
		polResend(t, ctx, store, clock, declared)
		clock.Add(arrWindow - time.Minute - arrBound - 2*time.Second)

		slow := &arrSlowStore{Store: store, clock: clock, claim: time.Second, extend: 2 * time.Second}
		sender := &arrSender{remote: remote}
		opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", declared)}
		cfg := turnframe.DispatchConfig{WorkerID: "w2", SendTimeout: arrBound, LeaseMargin: time.Millisecond}
		report, err := turnframe.NewDispatcher(slow, sender, cfg, opts...).RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(remote.applied(string(row.Key)), 1) // never done twice
		is.Equal(sender.count(), 0)                  // withheld: the sender not called
		is.Equal(report.Unknown, []turnframe.OutboxID{row.ID})
		is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeKeyForgotten)
	})
}
