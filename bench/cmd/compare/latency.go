package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
	"github.com/turnframe/turnframe/sqlitestore"
)

// latencyPace is the time between two enqueues of the latency workload:
// long enough that a woken Run has sent one row before the next comes,
// and not a divisor of the ticker's second, so enqueues fall at every
// point of a tick.
const latencyPace = 23 * time.Millisecond

// latencyTicker is the tick of the hand-written loop Run replaces: at each
// tick it calls RunOnce until a sweep claims nothing.
const latencyTicker = time.Second

// latencyDriver is one way of running a Dispatcher in the latency workload.
type latencyDriver struct {
	name  string
	start func(ctx context.Context, d *turnframe.Dispatcher) error // blocks until ctx ends
}

var latencyDrivers = []latencyDriver{
	{"`Run` with enqueue wake-up", func(ctx context.Context, d *turnframe.Dispatcher) error { return d.Run(ctx) }},
	{"`RunOnce` on a 1 s ticker", func(ctx context.Context, d *turnframe.Dispatcher) error {
		tick := time.NewTicker(latencyTicker)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if _, err := bench.DrainDispatcher(ctx, d, 0); err != nil && ctx.Err() == nil { // RunOnce until a sweep finds nothing
					return err
				}
			}
		}
	}},
}

// timedSender records when each row reached it.
type timedSender struct {
	mu   sync.Mutex
	at   map[turnframe.OutboxID][]time.Time
	sent chan struct{}
}

func (s *timedSender) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	now := time.Now()
	s.mu.Lock()
	s.at[e.ID] = append(s.at[e.ID], now)
	s.mu.Unlock()
	s.sent <- struct{}{}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
}

// latency: enqueue → send, in one process, for each driver: rows are
// committed one at a time every latencyPace (as Runtime.Execute commits
// them), and each row's latency runs from its commit's return to the
// Sender's call.
func (r *run) latency() {
	n := r.sz.Latency
	t := table{title: fmt.Sprintf("6. enqueue → send latency, one process (N = %d rows, one every %v)", n, latencyPace),
		intro: "From the return of the `Apply` that commits a row (one command's commit, as `Runtime.Execute` writes it) to the `Sender`'s call, " +
			"on sqlitestore, a no-op sender, default `DispatchConfig`. `Run` is woken by the store's `Enqueued` channel; " +
			"the hand-written loop calls `RunOnce` once a second until a sweep finds nothing, so its latency is spread over the tick.",
		header: []string{"driver"}}
	for _, s := range r.syncs {
		t.header = append(t.header, "median ms "+string(s), "p99 ms "+string(s))
	}
	for _, drv := range latencyDrivers {
		row := []string{drv.name}
		for _, s := range r.syncs {
			lat, err := r.measureLatency(drv, s, n)
			if err != nil {
				r.fail("latency %s %s: %v", drv.name, s, err)
				row = append(row, "—", "—")
				continue
			}
			row = append(row, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
		}
		t.rows = append(t.rows, row)
	}
	r.tables = append(r.tables, t)
}

// measureLatency runs drv over a fresh file at s while n rows are
// committed, and returns each row's latency. Every row must be sent exactly
// once.
func (r *run) measureLatency(drv latencyDriver, s bench.Sync, n int) ([]time.Duration, error) {
	ctx := r.ctx
	st, err := bench.OpenStore(ctx, r.folder.File("latency"), s)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	fx, err := bench.PrepareEnqueue(ctx, st, n)
	if err != nil {
		return nil, err
	}
	sender := &timedSender{at: make(map[turnframe.OutboxID][]time.Time, n), sent: make(chan struct{}, 2*n)} // room for a row sent twice: counted, never blocking
	d := turnframe.NewDispatcher(st, sender, turnframe.DefaultDispatchConfig("latency"))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- drv.start(runCtx, d) }()
	committed, err := enqueuePaced(ctx, st, fx, n)
	if err == nil {
		err = awaitSends(sender.sent, n, 2*latencyTicker)
	}
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for id, at := range committed {
		sends := sender.at[id]
		if len(sends) != 1 {
			return nil, fmt.Errorf("row %v sent %d times, want once", id, len(sends))
		}
		lat = append(lat, sends[0].Sub(at))
	}
	return lat, nil
}

// enqueuePaced commits the fixture's n commands one every latencyPace and
// returns when each row's commit returned.
func enqueuePaced(ctx context.Context, st *sqlitestore.Store, fx *bench.EnqueueFixture, n int) (map[turnframe.OutboxID]time.Time, error) {
	committed := make(map[turnframe.OutboxID]time.Time, n)
	pace := time.NewTicker(latencyPace)
	defer pace.Stop()
	for i := range n {
		<-pace.C
		w := fx.Commits[i]
		w.Now = time.Now()
		applied, err := st.Apply(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("enqueue %d: %w", i, err)
		}
		committed[applied.Outbox[0].ID] = time.Now()
	}
	return committed, nil
}

// awaitSends waits for n sends, giving up when none came for quiet.
func awaitSends(sent <-chan struct{}, n int, quiet time.Duration) error {
	for got := 0; got < n; got++ {
		select {
		case <-sent:
		case <-time.After(quiet):
			return fmt.Errorf("%d of %d rows sent; no send for %v", got, n, quiet)
		}
	}
	return nil
}
