package turnframe_test

import (
	"context"
	"math"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// DispatchConfig.Concurrency has no documented ceiling, and NewDispatcher
// documents every configuration it panics on; it took math.MaxInt ("no
// cap": BatchSize and the due rows bound a sweep anyway). Run then panicked
// on its first line (a channel buffered by Concurrency), taking the process
// down from the dispatcher's goroutine, where RunOnce with the same
// configuration sends rows.
func TestRunTakesTheConcurrencyNewDispatcherTook(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	sent := make(chan turnframe.OutboxEntry, 1)
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		sent <- e
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", Concurrency: math.MaxInt})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		_ = d.Run(ctx)
	}()
	select {
	case e := <-sent:
		is.Equal(e.ID, rows[0].ID) // Run sends the due row
		cancel()
		is.Equal(<-done, nil) // and returns without a panic
	case p := <-done:
		cancel()
		t.Fatalf("Run panicked: %v", p)
	}
}
