package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// destCounter is a sender that counts the sends in flight per destination
// and keeps the most it saw at once. Each send reports its start on
// started and blocks until proceed is closed.
type destCounter struct {
	started  chan string
	finished chan string
	proceed  chan struct{}

	mu       sync.Mutex
	inFlight map[string]int
	most     map[string]int
}

func newDestCounter() *destCounter {
	return &destCounter{
		started: make(chan string, 64), finished: make(chan string, 64), proceed: make(chan struct{}),
		inFlight: make(map[string]int), most: make(map[string]int),
	}
}

func (c *destCounter) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	c.mu.Lock()
	c.inFlight[e.Destination]++
	c.most[e.Destination] = max(c.most[e.Destination], c.inFlight[e.Destination])
	c.mu.Unlock()
	c.started <- e.Destination
	<-c.proceed
	c.mu.Lock()
	c.inFlight[e.Destination]--
	c.mu.Unlock()
	c.finished <- e.Destination
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// mostAtOnce returns the most sends to destination the counter saw at once.
func (c *destCounter) mostAtOnce(destination string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most[destination]
}

// A destination's limit caps its sends in flight across every send of the
// Dispatcher: within one RunOnce's batch, and across Run's batches (one row
// each here, so only a limit shared by the batches holds). The other
// destination is capped by Concurrency only.
func TestDestinationLimitCapsTheSendsInFlightToOneDestination(t *testing.T) {
	tests := []struct {
		name      string
		batchSize int
		run       func(t *testing.T, d *turnframe.Dispatcher) (stop func())
	}{
		{"WithinOneRunOnce", 16, func(t *testing.T, d *turnframe.Dispatcher) func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				if _, err := d.RunOnce(context.Background(), dispNow); err != nil {
					t.Errorf("run once: %v", err)
				}
			}()
			return func() { await(t, done, "RunOnce returns") }
		}},
		{"AcrossRunsBatches", 1, func(t *testing.T, d *turnframe.Dispatcher) func() {
			stop := runDispatcher(t, d)
			return func() {
				if err := stop(); err != nil {
					t.Errorf("run: %v", err)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			store := memstoreFor(t)
			rows := dispEnqueue(t, store, "acme", "k1", dispMessages(4, "slow", "")...)
			rows = append(rows, dispEnqueue(t, store, "acme", "k2", dispMessages(1, "fast", "")...)...)
			sender := newDestCounter()
			cfg := runConfig()
			cfg.Concurrency, cfg.BatchSize = 4, tc.batchSize
			cfg.DestinationLimits = map[string]int{"slow": 2, "fast": 0}
			d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
			stop := tc.run(t, d)
			is.Equal(await(t, sender.started, "a first send"), "slow")
			is.Equal(await(t, sender.started, "a second send"), "slow") // two slow sends run at once
			close(sender.proceed)
			for range rows {
				await(t, sender.finished, "every send")
			}
			stop()
			is.Equal(sender.mostAtOnce("slow"), 2) // never more than its limit
			for _, r := range rows {
				is.Equal(dispGet(t, store, r.ID).Status, turnframe.OutboxCompleted) // every row sent once and settled
			}
		})
	}
}

// A row waiting for its destination's turn when RunOnce's context ends is
// not sent: it goes back Pending with CodeNotSent.
func TestARowWaitingForItsDestinationIsNotSentOnceTheContextEnds(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(2, "slow", "")...)
	sender := newDestCounter()
	cfg := runConfig()
	cfg.Concurrency = 2
	cfg.DestinationLimits = map[string]int{"slow": 1}
	d := turnframe.NewDispatcher(store, sender, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := runOnceAsync(t, d, ctx, dispNow)
	await(t, sender.started, "the first send")
	cancel()              // the second row waits for "slow"
	close(sender.proceed) // the first send answers, late: its context ended
	report := await(t, done, "RunOnce returns")
	is.Equal(len(report.Retried), 1) // the waiting row was put back: either row, whichever lost the race for the place
	waiter := report.Retried[0]
	is.True(waiter == rows[0].ID || waiter == rows[1].ID)
	is.Equal(dispGet(t, store, waiter).LastCode, turnframe.CodeNotSent) // not sent
	is.Equal(len(sender.started), 0)                                    // and never started
}
