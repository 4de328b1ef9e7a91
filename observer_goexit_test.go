package turnframe_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// DESIGN.md §8: "A settlement always lands"; §12: an Observer is called
// "on its goroutine or one it started; a panic in Observe is logged and the
// signal dropped, never the process (signals are emitted on a sweep's
// goroutines, where the application cannot recover)". An Observer that
// ends its goroutine instead of panicking — runtime.Goexit, as t.FailNow
// does in an app's test that asserts on signals, the case the fifth attack
// closed for a Sender — ends the sweep's sender goroutine between the send
// and its settlement: the remote completed the send, RunOnce reports the
// row Unsettled and leaves it Dispatching, to be expired to unknown and,
// with no Remote declared, sent again.
func TestAnObserverThatEndsItsGoroutineNeverLosesASettlement(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, rtAccount, "k1", dispMessages(1, "bakery", "")...)
	sends := 0
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		sends++
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	obs := turnframe.ObserverFunc(func(s turnframe.Signal, _ turnframe.Labels, _ time.Duration) {
		if s == turnframe.SignalExternalLatency {
			runtime.Goexit() // an assertion in the app's observer failed: t.FailNow
		}
	})
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1"}, turnframe.WithObserver(obs))
	report, err := d.RunOnce(ctx, dispNow)
	is.NoErr(err)
	t.Logf("sends %d; report %+v; row %v", sends, report, dispGet(t, store, rows[0].ID).Status)
	is.Equal(sends, 1)
	is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxCompleted) // the remote has it
}
