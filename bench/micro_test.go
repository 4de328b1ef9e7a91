package bench_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/bench"
	"github.com/turnframe/turnframe/sqlitestore"
)

// Micro-benchmarks of the store's hot paths and the id generator:
//
//	cd bench && go test -run '^$' -bench . -benchmem
//	cd bench && go test -run '^$' -bench 'Settle' -benchmem -cpuprofile cpu.out && go tool pprof -top cpu.out
//
// Besides ns/op each reports cpu-ns/op, the process's CPU time per
// operation: on a shared machine, compare two builds by it (timeCPU). Each store benchmark runs at FULL and at NORMAL on a fresh file; the
// fixture (seeded rows, claims, turns) is built with the timer stopped.

var syncs = []bench.Sync{bench.SyncFull, bench.SyncNormal}

func openStore(b *testing.B, s bench.Sync) (*sqlitestore.Store, string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	st, err := bench.OpenStore(context.Background(), path, s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, path
}

func seedDue(b *testing.B, path string, n int) {
	b.Helper()
	if err := bench.Seed(context.Background(), path, bench.SeedRows{N: n, Status: "pending", Due: time.Now().Add(-time.Minute)}); err != nil {
		b.Fatal(err)
	}
}

// claimAll claims n seeded rows in batches of limit, untimed.
func claimAll(b *testing.B, st turnframe.OutboxStore, n int) []turnframe.Claim {
	b.Helper()
	var out []turnframe.Claim
	for len(out) < n {
		c, err := st.ClaimDue(context.Background(), time.Now(), min(turnframe.MaxLimit, n-len(out)), "micro", bench.ClaimLease)
		if err != nil {
			b.Fatal(err)
		}
		if len(c) == 0 {
			b.Fatalf("claimed %d of %d", len(out), n)
		}
		out = append(out, c...)
	}
	return out
}

// BenchmarkClaim16 is one ClaimDue of 16 rows (one transaction) from a
// table of due rows; ns/op is per claim.
func BenchmarkClaim16(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			st, path := openStore(b, s)
			seedDue(b, path, 16*b.N+16)
			ctx := context.Background()
			defer timeCPU(b)()
			for range b.N {
				c, err := st.ClaimDue(ctx, time.Now(), 16, "micro", bench.ClaimLease)
				if err != nil || len(c) != 16 {
					b.Fatalf("claim: %d rows, %v", len(c), err)
				}
			}
		})
	}
}

// BenchmarkSettleOne is Complete of one claimed row (one transaction).
func BenchmarkSettleOne(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			st, path := openStore(b, s)
			seedDue(b, path, b.N)
			claims := claimAll(b, st, b.N)
			ctx := context.Background()
			defer timeCPU(b)()
			for i := range b.N {
				if err := turnframe.CompleteClaim(ctx, st, claims[i], "ref", time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSettle16 is one Settle of 16 completions (one transaction, the
// group commit); ns/op is per transaction of 16 rows.
func BenchmarkSettle16(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			st, path := openStore(b, s)
			seedDue(b, path, 16*b.N)
			claims := claimAll(b, st, 16*b.N)
			ctx := context.Background()
			batch := make([]turnframe.OutboxSettlement, 16)
			defer timeCPU(b)()
			for i := range b.N {
				now := time.Now()
				for j := range batch {
					batch[j] = turnframe.OutboxSettlement{Claim: claims[16*i+j], To: turnframe.OutboxCompleted, Now: now}
				}
				res, err := st.Settle(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range res {
					if e != nil {
						b.Fatal(e)
					}
				}
			}
		})
	}
}

// BenchmarkApplyCommit is one Store.Apply committing a command with one
// 256-byte event and one 256-byte outbox row, and the turn's Advance, as
// Runtime.Execute writes it (the enqueue-in-tx workload).
func BenchmarkApplyCommit(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			st, _ := openStore(b, s)
			ctx := context.Background()
			fx, err := bench.PrepareEnqueue(ctx, st, b.N)
			if err != nil {
				b.Fatal(err)
			}
			defer timeCPU(b)()
			for i := range b.N {
				if err := fx.Enqueue(ctx, st, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyCommitNoAdvance is BenchmarkApplyCommit without the
// turn's Advance to PhaseCommitted that Runtime.Execute sends with a turn's
// last settlement: the difference between the two is what counting the
// turn's pending entries then costs.
func BenchmarkApplyCommitNoAdvance(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			st, _ := openStore(b, s)
			ctx := context.Background()
			fx, err := bench.PrepareEnqueue(ctx, st, b.N)
			if err != nil {
				b.Fatal(err)
			}
			for i := range fx.Commits {
				fx.Commits[i].Advance = turnframe.PhaseUnset
			}
			defer timeCPU(b)()
			for i := range b.N {
				if err := fx.Enqueue(ctx, st, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTurn is one whole turn (bench.RunTurn: Receive, Plan one
// command, Execute committing one event and one outbox row, Deliver), with
// its command taken first (take) and declared local (local): five and four
// write transactions.
func BenchmarkTurn(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []turnframe.Option
	}{{"take", nil}, {"local", []turnframe.Option{turnframe.WithLocalCommand("book")}}} {
		for _, s := range syncs {
			b.Run(mode.name+"/"+string(s), func(b *testing.B) {
				st, _ := openStore(b, s)
				rt := turnframe.New(st, mode.opts...)
				ctx := context.Background()
				payload := bench.Payload()
				defer timeCPU(b)()
				for i := range b.N {
					if err := bench.RunTurn(ctx, rt, i, payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRawEnqueue is the raw two-INSERT transaction, for comparison
// with BenchmarkApplyCommit.
func BenchmarkRawEnqueue(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			raw, err := bench.OpenRaw(context.Background(), filepath.Join(b.TempDir(), "raw.db"), s)
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			payload := bench.Payload()
			ctx := context.Background()
			defer timeCPU(b)()
			for range b.N {
				if err := raw.Enqueue(ctx, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventID is IDGenerator.EventID from one goroutine, and from all
// of them at once (the generator holds a lock).
func BenchmarkEventID(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		g := turnframe.NewIDGenerator()
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			_ = g.EventID(now)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		g := turnframe.NewIDGenerator()
		now := time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = g.EventID(now)
			}
		})
	})
}

// BenchmarkRawClaimSettle16 is the raw ceiling's unit of work: claim 16
// (one transaction) and settle all 16 (one more). Compare with
// BenchmarkClaim16 + BenchmarkSettle16.
func BenchmarkRawClaimSettle16(b *testing.B) {
	for _, s := range syncs {
		b.Run(string(s), func(b *testing.B) {
			ctx := context.Background()
			raw, err := bench.OpenRaw(ctx, filepath.Join(b.TempDir(), "raw.db"), s)
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			if err := raw.Seed(ctx, 16*b.N); err != nil {
				b.Fatal(err)
			}
			defer timeCPU(b)()
			for range b.N {
				if n, err := raw.Drain(ctx, false, 16); err != nil || n != 16 {
					b.Fatalf("drained %d: %v", n, err)
				}
			}
		})
	}
}

// drainAblations are the schema's parts that a drain pays for beyond the
// raw ceiling's table, each removed from a copy of the schema by SQL after
// the store opened, to measure what it costs: the audit trail's records
// (a trigger drops every history insert, so the statement still runs but
// writes no row and no index entry), the lease index ExpireClaims reads and
// the finished index Prune reads. None of them is ever removed in the
// library; BenchmarkDrainAblation exists to say, with a figure, what
// bounds the drain (bench/RESULTS.md).
var drainAblations = []struct {
	name string
	sql  []string
}{
	{"schema", nil},
	{"no-history", []string{noHistorySQL}},
	{"no-lease-index", []string{`DROP INDEX outbox_leases`}},
	{"no-finished-index", []string{`DROP INDEX outbox_finished`}},
	{"none-of-them", []string{noHistorySQL, `DROP INDEX outbox_leases`, `DROP INDEX outbox_finished`}},
}

const noHistorySQL = `CREATE TRIGGER bench_no_history BEFORE INSERT ON history BEGIN SELECT RAISE(IGNORE); END`

// BenchmarkDrainAblation is a drain's unit of work through the store, as
// RunOnce at Concurrency 8 groups it: ClaimDue of 16 rows and one Settle
// completing all 16, two transactions, on the shipped schema and on copies
// without one part each (drainAblations). Compare with
// BenchmarkRawClaimSettle16, the ceiling's unit.
func BenchmarkDrainAblation(b *testing.B) {
	for _, s := range syncs {
		for _, a := range drainAblations {
			b.Run(string(s)+"/"+a.name, func(b *testing.B) {
				st, path := openStore(b, s)
				seedDue(b, path, 16*b.N+16)
				ablate(b, path, a.sql)
				ctx := context.Background()
				batch := make([]turnframe.OutboxSettlement, 16)
				defer timeCPU(b)()
				for range b.N {
					now := time.Now()
					c, err := st.ClaimDue(ctx, now, 16, "micro", bench.ClaimLease)
					if err != nil || len(c) != 16 {
						b.Fatalf("claim: %d rows, %v", len(c), err)
					}
					for j := range batch {
						batch[j] = turnframe.OutboxSettlement{Claim: c[j], To: turnframe.OutboxCompleted, Now: now}
					}
					if _, err := st.Settle(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// ablate runs stmts on the file at path through a connection of its own.
func ablate(b *testing.B, path string, stmts []string) {
	b.Helper()
	db, err := bench.OpenDB(context.Background(), path, bench.SyncNormal, true, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}
