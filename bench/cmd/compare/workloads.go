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

// steps returns a session step that calls one(i) for the next k items.
func steps(one func(i int) error) func(k int) (int, error) {
	next := 0
	return func(k int) (int, error) {
		for range k {
			if err := one(next); err != nil {
				return 0, err
			}
			next++
		}
		return k, nil
	}
}

// rawEnqueueContender is the raw two-INSERT transaction (also the scale
// reference of the turn workload).
func (r *run) rawEnqueueContender() contender {
	return contender{rawEnq, func(path string, s bench.Sync, n int) (*session, error) {
		raw, err := bench.OpenRaw(r.ctx, path, s)
		if err != nil {
			return nil, err
		}
		payload := bench.Payload()
		return &session{
			step:  steps(func(int) error { return raw.Enqueue(r.ctx, payload) }),
			close: func() { raw.Close() },
		}, nil
	}}
}

// enqueue: one transaction holding an application row and one message.
func (r *run) enqueue() {
	ctx := r.ctx
	cs := []contender{
		{tfApply, func(path string, s bench.Sync, n int) (*session, error) {
			st, err := bench.OpenStore(ctx, path, s)
			if err != nil {
				return nil, err
			}
			fx, err := bench.PrepareEnqueue(ctx, st, n)
			if err != nil {
				st.Close()
				return nil, err
			}
			return &session{
				step: steps(func(i int) error { return fx.Enqueue(ctx, st, i) }),
				finish: func() (map[string]float64, error) {
					if err := fx.CheckCommitted(ctx, st.ReadDB()); err != nil {
						return nil, err
					}
					return nil, checkCount(ctx, st, "pending", n)
				},
				close: func() { st.Close() },
			}, nil
		}},
		r.rawEnqueueContender(),
		{riverName, func(path string, s bench.Sync, n int) (*session, error) {
			rv, err := bench.OpenRiver(ctx, path, s, false)
			if err != nil {
				return nil, err
			}
			payload := bench.Payload()
			args := bench.RiverArgs{Payload: bench.RiverPayload()}
			return &session{
				step:  steps(func(int) error { return rv.Enqueue(ctx, payload, args) }),
				close: func() { rv.Close() },
			}, nil
		}},
		{goqName, func(path string, s bench.Sync, n int) (*session, error) {
			g, err := bench.OpenGoqite(ctx, path, s)
			if err != nil {
				return nil, err
			}
			payload := bench.Payload()
			return &session{
				step:  steps(func(int) error { return g.Enqueue(ctx, payload) }),
				close: func() { g.Close() },
			}, nil
		}},
	}
	n := r.sz.Enqueue
	med := r.measureAll("enqueue", n, cs)
	r.plots.addRates("enqueue", cs, r.syncs, med)
	t := r.rateTable(fmt.Sprintf("1. enqueue-in-tx (N = %d)", n),
		"One transaction holding one application row and one enqueued message. "+
			"turnframe: what is timed is exactly one `Store.Apply` per command, the one `Runtime.Execute` writes: the command's Committed settlement, one 256-byte event (the application row), one 256-byte outbox row and the turn's `Advance` to Committed (taken by the turn's last command); "+
			"the turns and journal entries it needs (turns of 8 commands, Executing, leased) are built beforehand, untimed, with two Applies per turn. "+
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
	tf := func(concurrency int) func(string, bench.Sync, int) (*session, error) {
		return func(path string, s bench.Sync, n int) (*session, error) {
			st, err := bench.OpenStore(ctx, path, s)
			if err != nil {
				return nil, err
			}
			if err := bench.Seed(ctx, path, bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)}); err != nil {
				st.Close()
				return nil, err
			}
			sender := &bench.NoopSender{}
			counted := &bench.CountingOutbox{OutboxStore: st}
			d := bench.NewDispatcher(counted, sender, "bench-drain", concurrency)
			return &session{
				step: func(k int) (int, error) { return bench.DrainDispatcher(ctx, d, k) },
				finish: func() (map[string]float64, error) {
					if more, err := bench.DrainDispatcher(ctx, d, 0); err != nil || more != 0 {
						return nil, fmt.Errorf("%d rows left after the drain (%v)", more, err)
					}
					if sender.Sent.Load() != int64(n) {
						return nil, fmt.Errorf("sent %d rows, want %d", sender.Sent.Load(), n)
					}
					return map[string]float64{
						"settle tx per claim": float64(counted.Settles.Load()) / float64(max(1, counted.Claims.Load()-1)),
						"rows per settle tx":  float64(counted.Settled.Load()) / float64(max(1, counted.Settles.Load())),
						"lease-extension tx":  float64(counted.Extends.Load()),
					}, checkCount(ctx, st, "completed", n)
				},
				close: func() { st.Close() },
			}, nil
		}
	}
	rawDrain := func(perRow bool) func(string, bench.Sync, int) (*session, error) {
		return func(path string, s bench.Sync, n int) (*session, error) {
			raw, err := bench.OpenRaw(ctx, path, s)
			if err != nil {
				return nil, err
			}
			if err := raw.Seed(ctx, n); err != nil {
				raw.Close()
				return nil, err
			}
			return &session{
				step: func(k int) (int, error) { return raw.Drain(ctx, perRow, k) },
				finish: func() (map[string]float64, error) {
					if more, err := raw.Drain(ctx, perRow, 0); err != nil || more != 0 {
						return nil, fmt.Errorf("%d rows left after the drain (%v)", more, err)
					}
					return nil, nil
				},
				close: func() { raw.Close() },
			}, nil
		}
	}
	cs := []contender{
		{tfDrain1, tf(1)},
		{tfDrain8, tf(8)},
		{rawEach, rawDrain(true)},
		{rawAll, rawDrain(false)},
		{riverName, func(path string, s bench.Sync, n int) (*session, error) {
			rv, err := bench.OpenRiver(ctx, path, s, true)
			if err != nil {
				return nil, err
			}
			if err := rv.Seed(ctx, n); err != nil {
				rv.Close()
				return nil, err
			}
			// River's client works on goroutines of its own: it drains in
			// one piece, in its turn, timed from Start to the last
			// completion event.
			return &session{
				step: func(int) (int, error) {
					_, err := rv.Drain(ctx, n, drainTimeout)
					return n, err
				},
				close: func() { rv.Close() },
			}, nil
		}},
		{goqName, func(path string, s bench.Sync, n int) (*session, error) {
			g, err := bench.OpenGoqite(ctx, path, s)
			if err != nil {
				return nil, err
			}
			if err := g.Seed(ctx, n); err != nil {
				g.Close()
				return nil, err
			}
			return &session{
				step: func(k int) (int, error) { return g.Drain(ctx, k) },
				finish: func() (map[string]float64, error) {
					if more, err := g.Drain(ctx, 0); err != nil || more != 0 {
						return nil, fmt.Errorf("%d rows left after the drain (%v)", more, err)
					}
					return nil, nil
				},
				close: func() { g.Close() },
			}, nil
		}},
	}
	n := r.sz.Drain
	med := r.measureAll("drain", n, cs)
	r.plots.addRates("drain", cs, r.syncs, med)
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

// The turn contenders: the same turn, its command run with a take first
// (the default) or declared local (turnframe.WithLocalCommand: its handler
// makes no outside call, and the bench's commits only an event and a row).
const (
	tfTurn      = "turnframe turn"
	tfTurnLocal = "turnframe turn, local command"
)

// turn: whole turns through the runtime.
func (r *run) turn() {
	cs := []contender{
		r.turnContender(tfTurn),
		r.turnContender(tfTurnLocal, turnframe.WithLocalCommand("book")),
		r.rawEnqueueContender(),
	}
	n := r.sz.Turns
	med := r.measureAll("turn", n, cs)
	subjects := []string{tfTurn, tfTurnLocal}
	t := r.rateTable(fmt.Sprintf("3. whole turns (N = %d)", n),
		"A turn: `Receive`, `Plan` with one command, `Execute` whose handler commits one 256-byte event and one 256-byte outbox row, `Deliver`. "+
			"In the second row the command is declared local (`WithLocalCommand`: its handler makes no outside call), so Execute writes no Executing mark before it. "+
			"Transactions are counted as `Store.Apply` calls through a wrapping Store. The raw two-INSERT transaction (per second) is shown for scale: one turn does the work of that transaction plus its bookkeeping.",
		"per s", cs, subjects, med)
	for _, subj := range subjects {
		for _, s := range r.syncs {
			if m, ok := med[cell{subj, s}]; ok {
				x, _ := ratio(med, subj, rawEnq, s)
				v := m.Extra["write transactions per turn"]
				t.notes = append(t.notes, fmt.Sprintf("%s, %s: turns/s × write transactions per turn = %.2f of the raw one-transaction rate.", subj, s, x*v))
			}
		}
		for _, s := range r.syncs {
			if x, ok := ratio(med, subj, rawEnq, s); ok {
				t.notes = append(t.notes, target(fmt.Sprintf("%s ÷ raw transaction (%s)", subj, s), x, 0.25, true))
			}
		}
	}
	r.tables = append(r.tables, t)
}

// turnContender runs whole turns through a Runtime made with opts, counting
// its write transactions.
func (r *run) turnContender(name string, opts ...turnframe.Option) contender {
	ctx := r.ctx
	return contender{name, func(path string, s bench.Sync, n int) (*session, error) {
		st, err := bench.OpenStore(ctx, path, s)
		if err != nil {
			return nil, err
		}
		counted := &bench.CountingStore{Store: st}
		rt := turnframe.New(counted, opts...)
		payload := bench.Payload()
		return &session{
			step: steps(func(i int) error { return bench.RunTurn(ctx, rt, i, payload) }),
			finish: func() (map[string]float64, error) {
				return map[string]float64{"write transactions per turn": float64(counted.Applies.Load()) / float64(n)},
					checkCount(ctx, st, "pending", n)
			},
			close: func() { st.Close() },
		}, nil
	}}
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
