package turnframe_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// meter is an app's Observer with a bug: it never made the map its timings
// go to, so the first timed signal panics.
type meter struct {
	counts  map[turnframe.Signal]int
	timings map[turnframe.Signal][]time.Duration
}

func (m *meter) Observe(s turnframe.Signal, _ turnframe.Labels, d time.Duration) {
	if d == 0 {
		m.counts[s]++
		return
	}
	m.timings[s] = append(m.timings[s], d) // assignment to entry in nil map
}

// Observer: "It is called synchronously on the caller's goroutine". An
// Observer with a bug that panics must then panic where the caller can
// recover it, or not at all, as a handler's, a sender's or a verifier's
// panic never escapes. RunOnce called it on goroutines of its own (a send's
// latency on the sender's goroutine, a settlement's count on the
// settler's): the panic killed the process, whatever the caller recovered,
// with the row it had just sent left Dispatching, to expire as an unknown
// outcome.
func TestAnObserversPanicNeverKillsTheProcess(t *testing.T) {
	if os.Getenv("TURNFRAME_TEST_OBSERVER_CHILD") == "1" {
		observerChild(t)
		return
	}
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAnObserversPanicNeverKillsTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TURNFRAME_TEST_OBSERVER_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", lastLines(string(out), 12))
	is.NoErr(err)                                           // the process survives
	is.True(strings.Contains(string(out), "row completed")) // and the row sent is settled
}

func observerChild(t *testing.T) {
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	m := &meter{counts: map[turnframe.Signal]int{}} // timings forgotten
	d := turnframe.NewDispatcher(store, turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	}), turnframe.DispatchConfig{WorkerID: "w1"}, turnframe.WithObserver(m))
	func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Println("recovered on the caller's goroutine:", p)
			}
		}()
		_, _ = d.RunOnce(context.Background(), dispNow)
	}()
	if rec, err := store.GetOutbox(context.Background(), rows[0].ID); err == nil && rec.Status == turnframe.OutboxCompleted {
		fmt.Println("row completed")
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
