package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// heldRenewal holds the first renewal of a taken entry (its second
// settlement to Executing) until let is closed, telling of it by closing
// held, then writes it under the context it was given.
type heldRenewal struct {
	turnframe.Store
	executing atomic.Int32
	held, let chan struct{}
}

func (s *heldRenewal) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting && s.executing.Add(1) == 2 {
		close(s.held)
		<-s.let
	}
	return s.Store.Apply(ctx, w)
}

// The attempt's keeper "never outlives the call it keeps", and "the call
// ends with its caller". A keeper renewing under a context its caller's
// end does not reach survived every test: a renewal in flight as the
// caller gave up landed after Execute had left the attempt, holding the
// entry a whole lease more for an attempt nobody runs, so the next
// Execute or Recover had to wait that long to take it over. The renewal
// is made under the caller's context: once the caller left, the store
// refuses it, and the entry keeps the lease it had.
func TestAnAttemptsRenewalInFlightWhenItsCallerLeavesDoesNotLand(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		const margin = 30 * time.Second
		clk := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		store := &heldRenewal{Store: inner, held: make(chan struct{}), let: make(chan struct{})}
		rt := turnframe.New(store, turnframe.WithClock(clk.read), turnframe.WithCommandTimeout(30*time.Second),
			turnframe.WithLeaseMargin(margin), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("pay-1", "invoice/1", "pay"))

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		entered := make(chan struct{})
		h := turnframe.HandlerFunc(func(ctx context.Context, _ turnframe.Call) turnframe.Outcome {
			close(entered)
			<-ctx.Done() // it honours its context
			return turnframe.Unknown("")
		})
		out := make(chan error, 1)
		go func() {
			_, err := rt.Execute(ctx, rtAccount, turn, h)
			out <- err
		}()
		await(t, entered, "the handler is called")

		taken := rtEntry(t, inner, "pay-1")
		clk.set(taken.LeaseUntil.Add(-margin / 4)) // the lease ends within half a margin: the keeper renews it
		await(t, store.held, "the keeper renews the lease")
		cancel() // the caller gives up while the renewal is in flight
		close(store.let)
		err := await(t, out, "Execute returns")
		is.True(errors.Is(err, context.Canceled)) // the call ended with its caller

		left := rtEntry(t, inner, "pay-1")
		is.Equal(left.Status, turnframe.JournalExecuting) // the attempt was left, unsettled
		is.Equal(left.Attempt, taken.Attempt)
		is.True(left.LeaseUntil.Equal(taken.LeaseUntil)) // holding the lease it had, not one renewed after its caller left
	})
}
