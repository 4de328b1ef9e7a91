package turnframe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// waitedExpire makes ExpireClaims wait, as a write waits for a connection
// or a lock, until its context ends, having told of the wait on waiting.
type waitedExpire struct {
	turnframe.Store
	waiting chan struct{}
}

func (s *waitedExpire) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	close(s.waiting)
	<-ctx.Done()
	return nil, ctx.Err()
}

// DESIGN.md §1: "A call whose context ended returns, at the latest about a
// second after the leases it holds ended". A RunOnce that holds no lease
// yet waits for liveSweeps.gate while Run's release holds it alone, from
// its clock reading through its catch-up (extensions that may wait for a
// row lock, and for a keeper's extension that waits for one) and its
// ExpireClaims, which is bounded only by Run's context: the RunOnce
// ignored its own context for as long as the release took, and so did
// Run's own claim loop.
func TestARunOnceWaitingForARunsReleaseReturnsWhenItsContextEnds(t *testing.T) {
	const hang = 5 * time.Second // far more than a RunOnce with nothing to claim ever takes
	is := is.New(t)
	mem := memstoreFor(t)
	store := &waitedExpire{Store: mem, waiting: make(chan struct{})}
	d := turnframe.NewDispatcher(store, &dispAnswer{}, runConfig())

	releaseCtx, stopRelease := context.WithCancel(context.Background())
	defer stopRelease()
	released := make(chan error, 1)
	go func() { released <- turnframe.Release(releaseCtx, d) }()
	<-store.waiting // the release holds the gate, its expiry waiting

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller gave up
	done := make(chan error, 1)
	go func() {
		_, err := d.RunOnce(ctx, time.Now().UTC())
		done <- err
	}()
	returned := false
	var err error
	select {
	case err = <-done:
		returned = true
	case <-time.After(hang):
	}
	stopRelease()
	<-released
	if !returned {
		err = <-done
	}
	t.Logf("returned before the release ended: %v; error %v", returned, err)
	is.True(returned)                         // RunOnce returned once its context ended, not once the release did
	is.True(errors.Is(err, context.Canceled)) // with its context's error: nothing claimed
}
