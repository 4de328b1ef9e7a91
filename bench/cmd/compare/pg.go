package main

import (
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
)

// pgSync labels the one setting of the PostgreSQL workloads: the server's
// own (fsync and synchronous_commit on, Debian's defaults).
const pgSync bench.Sync = "PG"

const (
	pgApply    = "pgstore Apply"
	pgApplyApp = "pgstore Apply + App row"
	pgRawEnq   = "raw pgx: two INSERTs in one tx"
	pgRiverEnq = "River (riverpgxv5)"
	pgDrain1   = "pgstore RunOnce c=1"
	pgDrain8   = "pgstore RunOnce c=8"
	pgDrain64  = "pgstore RunOnce c=8, BatchSize 64"
	pgRiver1   = "River 1 worker"
	pgRiver8   = "River 8 workers"
	pgRiver16  = "River 16 workers"
)

// onServer runs f with the run's settings replaced by the server's one, so
// that measureAll and rateTable measure and report one column, PG.
func (r *run) onServer(f func()) {
	saved := r.syncs
	r.syncs = []bench.Sync{pgSync}
	defer func() { r.syncs = saved }()
	f()
}

// pgContender is a contender on a fresh schema of the server, dropped when
// its session closes.
func (r *run) pgContender(name string, open func(s *bench.PGSchema, n int) (*session, error)) contender {
	return contender{name, func(_ string, _ bench.Sync, n int) (*session, error) {
		schema, err := bench.NewPGSchema(r.ctx, r.pgURL)
		if err != nil {
			return nil, err
		}
		ss, err := open(schema, n)
		if err != nil {
			schema.Drop(r.ctx)
			return nil, err
		}
		inner := ss.close
		ss.close = func() {
			inner()
			if err := schema.Drop(r.ctx); err != nil {
				r.fail("drop schema %s: %v", schema.Name, err)
			}
		}
		return ss, nil
	}}
}

// pgStoreEnqueue is pgstore's enqueue-in-tx contender; with app, each
// commit also writes an application row through the Write's own pgx.Tx.
func (r *run) pgStoreEnqueue(name string, app bool) contender {
	ctx := r.ctx
	return r.pgContender(name, func(s *bench.PGSchema, n int) (*session, error) {
		st, err := bench.OpenPGStore(ctx, s)
		if err != nil {
			return nil, err
		}
		fx, err := bench.PrepareEnqueue(ctx, st, n)
		if err == nil && app {
			err = bench.AddAppRows(ctx, st.Store, fx)
		}
		if err != nil {
			st.Close()
			return nil, err
		}
		base := st.Statements.Load()
		return &session{
			step: steps(func(i int) error { return fx.Enqueue(ctx, st, i) }),
			finish: func() (map[string]float64, error) {
				extra := perRow(st.Statements, base, n)
				if err := fx.CheckCommittedPG(ctx, st.Pool()); err != nil {
					return nil, err
				}
				return extra, checkCountPG(st, "pending", n)
			},
			close: func() { st.Close() },
		}, nil
	})
}

// pgEnqueue: one transaction holding an application row and one message,
// on PostgreSQL.
func (r *run) pgEnqueue() {
	ctx := r.ctx
	cs := []contender{
		r.pgStoreEnqueue(pgApply, false),
		r.pgStoreEnqueue(pgApplyApp, true),
		r.pgContender(pgRiverEnq, func(s *bench.PGSchema, n int) (*session, error) {
			if err := bench.MigrateRiverPG(ctx, s); err != nil {
				return nil, err
			}
			rv, err := bench.OpenRiverPG(ctx, s, 0, nil)
			if err != nil {
				return nil, err
			}
			payload := bench.Payload()
			args := bench.RiverArgs{Payload: bench.RiverPayload()}
			base := rv.Statements.Load()
			return &session{
				step: steps(func(int) error { return rv.Enqueue(ctx, payload, args) }),
				finish: func() (map[string]float64, error) {
					extra := perRow(rv.Statements, base, n)
					var jobs, rows int
					err := rv.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM river_job), (SELECT count(*) FROM app_rows)`).Scan(&jobs, &rows)
					if err == nil && (jobs != n || rows != n) {
						err = fmt.Errorf("river: %d jobs and %d app rows, want %d of each", jobs, rows, n)
					}
					return extra, err
				},
				close: rv.Close,
			}, nil
		}),
		r.pgContender(pgRawEnq, func(s *bench.PGSchema, n int) (*session, error) {
			raw, err := bench.OpenRawPG(ctx, s)
			if err != nil {
				return nil, err
			}
			payload := bench.Payload()
			return &session{step: steps(func(int) error { return raw.Enqueue(ctx, payload) }), close: raw.Close}, nil
		}),
	}
	n := r.sz.PGEnqueue
	r.onServer(func() {
		med := r.measureAll("pgenqueue", n, cs)
		r.plots.addRates("pgenqueue", cs, r.syncs, med)
		t := r.rateTable(fmt.Sprintf("P1. enqueue-in-tx on PostgreSQL (N = %d)", n),
			"pgstore: exactly the turnframe Apply of table 1 (a command's Committed settlement, one 256-byte event as the application row, one 256-byte outbox row, the turn's Advance with its last command), "+
				"fixture built untimed; \"+ App row\" also inserts a row into the app's own table through the Write's `pgx.Tx` (`Write.App`, `pgstore.PgxTx`). "+
				"River: an application row + `InsertTx` in one `pgx.Tx`, an insert-only client. raw: two INSERTs (an app row, a row shaped like an outbox row with a partial due index) in one transaction. "+
				"One call at a time, each its own transaction and commit.",
			"rows/s", cs, []string{pgApply, pgApplyApp}, med)
		for _, subj := range []string{pgApply, pgApplyApp} {
			if x, ok := ratio(med, subj, pgRiverEnq, pgSync); ok {
				t.notes = append(t.notes, target("PostgreSQL enqueue-in-tx: "+subj+" ÷ River", x, 1, true))
			}
		}
		r.pgTables = append(r.pgTables, t)
	})
}

// pgDrain: N due rows (jobs), a no-op sender (worker), until empty.
func (r *run) pgDrain() {
	ctx := r.ctx
	tf := func(concurrency, batch int) func(*bench.PGSchema, int) (*session, error) {
		return func(s *bench.PGSchema, n int) (*session, error) {
			st, err := bench.OpenPGStore(ctx, s)
			if err != nil {
				return nil, err
			}
			if err := bench.SeedPG(ctx, st.Pool(), bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)}); err != nil {
				st.Close()
				return nil, err
			}
			sender := &bench.NoopSender{}
			counted := &bench.CountingOutbox{OutboxStore: st}
			base := st.Statements.Load()
			cfg := turnframe.DefaultDispatchConfig("bench-drain")
			cfg.Concurrency = concurrency
			cfg.BatchSize = batch
			d := turnframe.NewDispatcher(counted, sender, cfg)
			return &session{
				step: func(k int) (int, error) { return bench.DrainDispatcher(ctx, d, k) },
				finish: func() (map[string]float64, error) {
					if more, err := bench.DrainDispatcher(ctx, d, 0); err != nil || more != 0 {
						return nil, fmt.Errorf("%d rows left after the drain (%v)", more, err)
					}
					if sender.Sent.Load() != int64(n) {
						return nil, fmt.Errorf("sent %d rows, want %d", sender.Sent.Load(), n)
					}
					extra := perRow(st.Statements, base, n)
					extra["settle tx per claim"] = float64(counted.Settles.Load()) / float64(max(1, counted.Claims.Load()-1))
					extra["rows per settle tx"] = float64(counted.Settled.Load()) / float64(max(1, counted.Settles.Load()))
					return extra, checkCountPG(st, "completed", n)
				},
				close: func() { st.Close() },
			}, nil
		}
	}
	rv := func(workers int) func(*bench.PGSchema, int) (*session, error) {
		return func(s *bench.PGSchema, n int) (*session, error) {
			if err := bench.MigrateRiverPG(ctx, s); err != nil {
				return nil, err
			}
			rv, err := bench.OpenRiverPG(ctx, s, workers, nil)
			if err != nil {
				return nil, err
			}
			if err := rv.Seed(ctx, n); err != nil {
				rv.Close()
				return nil, err
			}
			// River works on goroutines of its own: it drains in one
			// piece, in its turn, from Start to the last completion event.
			base := rv.Statements.Load()
			return &session{
				step: func(int) (int, error) {
					_, err := rv.Drain(ctx, n, drainTimeout)
					return n, err
				},
				finish: func() (map[string]float64, error) { return perRow(rv.Statements, base, n), nil },
				close:  rv.Close,
			}, nil
		}
	}
	cs := []contender{
		r.pgContender(pgDrain1, tf(1, turnframe.DefaultBatchSize)),
		r.pgContender(pgDrain8, tf(8, turnframe.DefaultBatchSize)),
		r.pgContender(pgDrain64, tf(8, 64)),
		r.pgContender(pgRiver1, rv(1)),
		r.pgContender(pgRiver8, rv(8)),
		r.pgContender(pgRiver16, rv(16)),
	}
	n := r.sz.PGDrain
	r.onServer(func() {
		med := r.measureAll("pgdrain", n, cs)
		r.plots.addRates("pgdrain", cs, r.syncs, med)
		t := r.rateTable(fmt.Sprintf("P2. drain on PostgreSQL (N = %d due rows, no-op sender, until empty)", n),
			"pgstore: `Dispatcher.RunOnce` in a loop until a sweep claims nothing, default config (batch 16), Concurrency 1 and 8, exactly as table 2 drives sqlitestore (and, to show what bounds it, once with BatchSize 64, not the default); rows seeded untimed with SQL into pgstore's schema. "+
				"River: a client with a no-op worker, `MaxWorkers` 1, 8 and 16 (16 is table 2's River), FetchCooldown 1 ms, FetchPollInterval 10 ms, its default batch completer, jobs seeded untimed with `InsertManyFastTx`; timed from `Start` until the subscription has reported every job completed, then every job is checked completed at its first attempt.",
			"rows/s", cs, []string{pgDrain1, pgDrain8}, med)
		for _, p := range [][2]string{{pgDrain1, pgRiver1}, {pgDrain8, pgRiver8}} {
			if x, ok := ratio(med, p[0], p[1], pgSync); ok {
				t.notes = append(t.notes, target("PostgreSQL drain: "+p[0]+" ÷ "+p[1], x, 1, true))
			}
		}
		r.pgTables = append(r.pgTables, t)
	})
}

// checkCountPG fails unless the store holds exactly want outbox rows in
// status.
func checkCountPG(st *bench.PGStore, status string, want int) error {
	got, err := bench.CountStatusPG(contextBackground(), st.Pool(), status)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%d outbox rows %s, want %d", got, status, want)
	}
	return nil
}

// pgScale: pgstore's claim latency against finished rows.
func (r *run) pgScale() {
	ctx := r.ctx
	due := time.Now().Add(-time.Minute)
	var files []*scaleFile
	var stores []*bench.PGStore
	var schemas []*bench.PGSchema
	defer func() {
		for _, st := range stores {
			st.Close()
		}
		for _, s := range schemas {
			if err := s.Drop(ctx); err != nil {
				r.fail("drop schema %s: %v", s.Name, err)
			}
		}
	}()
	for _, finished := range r.sz.PGScale {
		label := fmt.Sprintf("%d finished + %d due", finished, r.sz.PGDue)
		s, err := bench.NewPGSchema(ctx, r.pgURL)
		if err != nil {
			r.fail("pgscale %s: %v", label, err)
			return
		}
		schemas = append(schemas, s)
		st, err := bench.OpenPGStore(ctx, s)
		if err != nil {
			r.fail("pgscale %s: %v", label, err)
			return
		}
		stores = append(stores, st)
		start := time.Now()
		err = bench.SeedPG(ctx, st.Pool(),
			bench.SeedRows{N: finished, Status: "completed", Due: due.Add(-time.Hour)},
			bench.SeedRows{N: r.sz.PGDue, Status: "pending", Due: due})
		if err != nil {
			r.fail("pgscale %s: %v", label, err)
			return
		}
		r.logf("pgscale  seeded %s in %v", label, time.Since(start).Round(time.Millisecond))
		files = append(files, &scaleFile{label: label, lat: map[bench.Sync][]time.Duration{}})
	}
	const rounds = 4
	per := max(1, r.sz.Claims/rounds)
	for range rounds {
		for i, f := range files {
			lat, err := bench.ClaimLatencies(ctx, stores[i], per)
			if err != nil {
				r.fail("pgscale %s: %v", f.label, err)
				return
			}
			f.lat[pgSync] = append(f.lat[pgSync], lat...)
		}
	}
	for i, f := range files {
		r.plots.addClaims("pgstore", r.sz.PGScale[i], f, []bench.Sync{pgSync})
	}
	r.onServer(func() {
		t := r.latencyTable("P3. pgstore claim latency against finished rows",
			fmt.Sprintf("Each schema: that many Completed rows, then %d due rows, seeded with SQL and VACUUM ANALYZEd (as autovacuum would have). "+
				"%d claims of 16 per schema (`ClaimDue`, one transaction each, commit included), in %d rounds alternating schemas.",
				r.sz.PGDue, per*rounds, rounds), files)
		if len(files) > 1 {
			small, large := files[0], files[len(files)-1]
			t.notes = append(t.notes, target(fmt.Sprintf("PostgreSQL claim latency, %s ÷ %s (median)", large.label, small.label),
				medianRatio(large, small, pgSync), 1.2, false))
		}
		r.pgTables = append(r.pgTables, t)
	})
}

// perRow returns the statements counted since base, per row, as an extra
// figure of the report.
func perRow(c *bench.StatementCounter, base int64, n int) map[string]float64 {
	return map[string]float64{"statements per row": float64(c.Load()-base) / float64(n)}
}
