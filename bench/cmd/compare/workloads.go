package main

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
	"github.com/turnframe/turnframe/sqlitestore"
)

// drainTimeout bounds one River drain: River is driven by its own
// goroutines, and a stuck run must fail rather than hang CI.
const drainTimeout = 10 * time.Minute

const (
	tfApply   = "turnframe Apply"
	tfDrain1  = "turnframe RunOnce c=1"
	tfDrain8  = "turnframe RunOnce c=8"
	rawEnq    = "raw: two INSERTs in one tx"
	rawEach   = "raw: claim 16, settle each in own tx"
	rawAll    = "raw: claim 16, settle all in one tx"
	riverName = "River (riversqlite)"
	goqName   = "goqite"
)

// enqueue: one transaction holding an application row and one message.
func (r *run) enqueue() {
	ctx := r.ctx
	cs := []contender{
		{tfApply, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			st, err := bench.OpenStore(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer st.Close()
			fx, err := bench.PrepareEnqueue(ctx, st, n)
			if err != nil {
				return bench.Measure{}, err
			}
			start := time.Now()
			for i := range n {
				if err := fx.Enqueue(ctx, st, i); err != nil {
					return bench.Measure{}, err
				}
			}
			m := bench.Measure{N: n, Elapsed: time.Since(start)}
			return m, checkCount(ctx, st, "pending", n)
		}},
		{rawEnq, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			raw, err := bench.OpenRaw(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer raw.Close()
			payload := bench.Payload()
			start := time.Now()
			for range n {
				if err := raw.Enqueue(ctx, payload); err != nil {
					return bench.Measure{}, err
				}
			}
			return bench.Measure{N: n, Elapsed: time.Since(start)}, nil
		}},
		{riverName, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			rv, err := bench.OpenRiver(ctx, path, s, false)
			if err != nil {
				return bench.Measure{}, err
			}
			defer rv.Close()
			payload := bench.Payload()
			args := bench.RiverArgs{Payload: bench.RiverPayload()}
			start := time.Now()
			for range n {
				if err := rv.Enqueue(ctx, payload, args); err != nil {
					return bench.Measure{}, err
				}
			}
			return bench.Measure{N: n, Elapsed: time.Since(start)}, nil
		}},
		{goqName, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			g, err := bench.OpenGoqite(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer g.Close()
			payload := bench.Payload()
			start := time.Now()
			for range n {
				if err := g.Enqueue(ctx, payload); err != nil {
					return bench.Measure{}, err
				}
			}
			return bench.Measure{N: n, Elapsed: time.Since(start)}, nil
		}},
	}
	n := r.sz.Enqueue
	med := r.measureAll("enqueue", n, cs)
	t := r.rateTable(fmt.Sprintf("1. enqueue-in-tx (N = %d)", n),
		"One transaction holding one application row and one enqueued message. "+
			"turnframe: what is timed is exactly one `Store.Apply` per command, writing the command's Committed settlement, one 256-byte event (the application row) and one 256-byte outbox row; "+
			"the turns and journal entries it needs (turns of 8 commands, Executing) are built beforehand, untimed, with two Applies per turn. "+
			"River: an application row + `InsertTx`; goqite: an application row + `SendTx`; raw: two prepared INSERTs in a `BEGIN IMMEDIATE` transaction.",
		"rows/s", cs, []string{tfApply}, med)
	if x, ok := ratio(med, rawEnq, tfApply, bench.SyncFull); ok {
		t.notes = append(t.notes, target("enqueue-in-tx: turnframe costs at most 1.3× the raw transaction (raw rows/s ÷ turnframe rows/s, FULL)", x, 1.3, false))
	}
	if x, ok := ratio(med, rawEnq, tfApply, bench.SyncNormal); ok {
		t.notes = append(t.notes, fmt.Sprintf("at NORMAL, turnframe costs %.2f× the raw transaction.", x))
	}
	r.tables = append(r.tables, t)
}

// drain: N due rows, a no-op sender, one worker, until empty.
func (r *run) drain() {
	ctx := r.ctx
	tf := func(concurrency int) func(string, bench.Sync, int) (bench.Measure, error) {
		return func(path string, s bench.Sync, n int) (bench.Measure, error) {
			st, err := bench.OpenStore(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer st.Close()
			if err := bench.Seed(ctx, path, bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)}); err != nil {
				return bench.Measure{}, err
			}
			sender := &bench.NoopSender{}
			counted := &bench.CountingOutbox{OutboxStore: st}
			d := bench.NewDispatcher(counted, sender, "bench-drain", concurrency)
			start := time.Now()
			got, err := bench.DrainDispatcher(ctx, d)
			m := bench.Measure{N: got, Elapsed: time.Since(start), Extra: map[string]float64{
				"settle tx per claim": float64(counted.Settles.Load()) / float64(max(1, counted.Claims.Load()-1)),
				"rows per settle tx":  float64(counted.Settled.Load()) / float64(max(1, counted.Settles.Load())),
			}}
			if err != nil {
				return m, err
			}
			if got != n || sender.Sent.Load() != int64(n) {
				return m, fmt.Errorf("drained %d rows and sent %d, want %d", got, sender.Sent.Load(), n)
			}
			return m, checkCount(ctx, st, "completed", n)
		}
	}
	rawDrain := func(perRow bool) func(string, bench.Sync, int) (bench.Measure, error) {
		return func(path string, s bench.Sync, n int) (bench.Measure, error) {
			raw, err := bench.OpenRaw(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer raw.Close()
			if err := raw.Seed(ctx, n); err != nil {
				return bench.Measure{}, err
			}
			start := time.Now()
			got, err := raw.Drain(ctx, perRow)
			m := bench.Measure{N: got, Elapsed: time.Since(start)}
			if err == nil && got != n {
				err = fmt.Errorf("drained %d rows, want %d", got, n)
			}
			return m, err
		}
	}
	cs := []contender{
		{tfDrain1, tf(1)},
		{tfDrain8, tf(8)},
		{rawEach, rawDrain(true)},
		{rawAll, rawDrain(false)},
		{riverName, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			rv, err := bench.OpenRiver(ctx, path, s, true)
			if err != nil {
				return bench.Measure{}, err
			}
			defer rv.Close()
			if err := rv.Seed(ctx, n); err != nil {
				return bench.Measure{}, err
			}
			elapsed, err := rv.Drain(ctx, n, drainTimeout)
			return bench.Measure{N: n, Elapsed: elapsed}, err
		}},
		{goqName, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			g, err := bench.OpenGoqite(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer g.Close()
			if err := g.Seed(ctx, n); err != nil {
				return bench.Measure{}, err
			}
			start := time.Now()
			got, err := g.Drain(ctx)
			m := bench.Measure{N: got, Elapsed: time.Since(start)}
			if err == nil && got != n {
				err = fmt.Errorf("drained %d rows, want %d", got, n)
			}
			return m, err
		}},
	}
	n := r.sz.Drain
	med := r.measureAll("drain", n, cs)
	t := r.rateTable(fmt.Sprintf("2. drain (N = %d due rows, no-op sender, one worker, until empty)", n),
		"turnframe: `Dispatcher.RunOnce` in a loop until a sweep claims nothing, default config (batch 16), Concurrency 1 and 8; rows seeded untimed with SQL into turnframe's own schema. "+
			"raw: the two ceilings of SQLITE-NOTES, on a table shaped like turnframe's outbox with the same fences. "+
			fmt.Sprintf("River: a client with a no-op worker (%d workers), timed from `Start` until the subscription has reported every job completed. ", bench.RiverMaxWorkers)+
			"goqite: `Receive` + `Delete`, each its own transaction, as its README does.",
		"rows/s", cs, []string{tfDrain1, tfDrain8}, med)
	for _, subj := range []string{tfDrain1, tfDrain8} {
		if x, ok := ratio(med, subj, rawAll, bench.SyncFull); ok {
			t.notes = append(t.notes, target("drain, "+subj+" ÷ raw settle-all ceiling (FULL)", x, 0.80, true))
		}
	}
	r.tables = append(r.tables, t)
}

// turn: whole turns through the runtime.
func (r *run) turn() {
	ctx := r.ctx
	var txPerTurn = map[bench.Sync]float64{}
	cs := []contender{
		{"turnframe turn", func(path string, s bench.Sync, n int) (bench.Measure, error) {
			st, err := bench.OpenStore(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer st.Close()
			cs := &bench.CountingStore{Store: st}
			rt := turnframe.New(cs)
			payload := bench.Payload()
			start := time.Now()
			for i := range n {
				if err := bench.RunTurn(ctx, rt, i, payload); err != nil {
					return bench.Measure{}, err
				}
			}
			m := bench.Measure{N: n, Elapsed: time.Since(start)}
			txPerTurn[s] = float64(cs.Applies.Load()) / float64(n)
			return m, checkCount(ctx, st, "pending", n)
		}},
		{rawEnq, func(path string, s bench.Sync, n int) (bench.Measure, error) {
			raw, err := bench.OpenRaw(ctx, path, s)
			if err != nil {
				return bench.Measure{}, err
			}
			defer raw.Close()
			payload := bench.Payload()
			start := time.Now()
			for range n {
				if err := raw.Enqueue(ctx, payload); err != nil {
					return bench.Measure{}, err
				}
			}
			return bench.Measure{N: n, Elapsed: time.Since(start)}, nil
		}},
	}
	n := r.sz.Turns
	med := r.measureAll("turn", n, cs)
	t := r.rateTable(fmt.Sprintf("3. whole turns (N = %d)", n),
		"A turn: `Receive`, `Plan` with one command, `Execute` whose handler commits one 256-byte event and one 256-byte outbox row, `Deliver`. "+
			"Transactions are counted as `Store.Apply` calls through a wrapping Store. The raw two-INSERT transaction (per second) is shown for scale: one turn does the work of that transaction plus its bookkeeping.",
		"per s", cs, []string{"turnframe turn"}, med)
	for _, s := range r.syncs {
		if v, ok := txPerTurn[s]; ok {
			x, _ := ratio(med, "turnframe turn", rawEnq, s)
			t.notes = append(t.notes, fmt.Sprintf("%s: %.2f write transactions per turn; turns/s × transactions per turn = %.2f of the raw one-transaction rate.", s, v, x*v))
		}
	}
	r.tables = append(r.tables, t)
}

// checkCount fails unless the store's file holds exactly want outbox rows
// in status: every contender is checked for doing what it was timed doing.
func checkCount(ctx context.Context, st *sqlitestore.Store, status string, want int) error {
	got, err := bench.CountStatus(ctx, st.ReadDB(), status)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%d outbox rows %s, want %d", got, status, want)
	}
	return nil
}
