package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverPG is River on its pgx driver (riverpgxv5) in one schema of the
// server, with a pool of PGPoolConns connections, as pgstore gets.
type RiverPG struct {
	Pool       *pgxpool.Pool
	Client     *river.Client[pgx.Tx]
	Statements *StatementCounter
}

// MigrateRiverPG applies River's migrations and the application table to
// the schema.
func MigrateRiverPG(ctx context.Context, s *PGSchema) error {
	pool, err := pgxpool.New(ctx, s.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, pgAppSchema); err != nil {
		return fmt.Errorf("app table: %w", err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// OpenRiverPG makes a River client on the schema (migrated already). With
// workers > 0 it works the default queue with that many no-op workers
// (MaxWorkers), fetching as eagerly as River allows (FetchCooldown at its
// 1 ms minimum, polling every 10 ms as a fallback: on PostgreSQL River is
// woken by LISTEN/NOTIFY, and after a fetch it fetches again as soon as a
// worker slot frees); record, when not nil, is told the id of every job
// worked. With workers = 0 it is an insert-only client.
func OpenRiverPG(ctx context.Context, s *PGSchema, workers int, record func(int64)) (*RiverPG, error) {
	pool, count, err := NewPGPool(ctx, s.URL)
	if err != nil {
		return nil, err
	}
	cfg := &river.Config{Logger: quietLogger()}
	if workers > 0 {
		ws := river.NewWorkers()
		river.AddWorker(ws, &riverRecordingWorker{record: record})
		cfg.Workers = ws
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
		cfg.FetchCooldown = river.FetchCooldownMin
		cfg.FetchPollInterval = 10 * time.Millisecond
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &RiverPG{Pool: pool, Client: client, Statements: count}, nil
}

// riverRecordingWorker does nothing but report the job's id.
type riverRecordingWorker struct {
	river.WorkerDefaults[RiverArgs]
	record func(int64)
}

func (w *riverRecordingWorker) Work(_ context.Context, j *river.Job[RiverArgs]) error {
	if w.record != nil {
		w.record(j.ID)
	}
	return nil
}

// Close closes the pool.
func (r *RiverPG) Close() { r.Pool.Close() }

// Enqueue is River's enqueue-in-tx on PostgreSQL: the application row and
// InsertTx in one transaction.
func (r *RiverPG) Enqueue(ctx context.Context, payload []byte, args RiverArgs) error {
	return pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO app_rows (payload) VALUES ($1)`, payload); err != nil {
			return err
		}
		_, err := r.Client.InsertTx(ctx, tx, args, nil)
		return err
	})
}

// Seed inserts n jobs with InsertManyFastTx (COPY), 10,000 per transaction
// (untimed).
func (r *RiverPG) Seed(ctx context.Context, n int) error {
	for done := 0; done < n; {
		k := min(10_000, n-done)
		params := make([]river.InsertManyParams, k)
		for i := range params {
			params[i] = river.InsertManyParams{Args: RiverArgs{Payload: RiverPayload()}}
		}
		err := pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
			_, err := r.Client.InsertManyFastTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return fmt.Errorf("river seed: %w", err)
		}
		done += k
	}
	_, err := r.Pool.Exec(ctx, `VACUUM ANALYZE river_job`)
	return err
}

// Drain starts the client and returns how long it took until n jobs were
// reported completed, then stops it and checks that every job is completed
// after exactly one attempt.
func (r *RiverPG) Drain(ctx context.Context, n int, timeout time.Duration) (time.Duration, error) {
	elapsed, err := drainRiver(ctx, r.Client, n, timeout)
	if err != nil {
		return 0, err
	}
	return elapsed, CheckRiverPG(ctx, r.Pool, n)
}

// CheckRiverPG fails unless the schema holds exactly n jobs, all completed
// after one attempt: none was worked twice.
func CheckRiverPG(ctx context.Context, pool *pgxpool.Pool, n int) error {
	var total, completed, once int
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state = 'completed' AND attempt = 1) FROM river_job`).Scan(&total, &completed, &once)
	if err != nil {
		return err
	}
	if total != n || completed != n || once != n {
		return fmt.Errorf("river: %d jobs, %d completed, %d completed at the first attempt; want %d of each", total, completed, once, n)
	}
	return nil
}

// RiverPGLeft returns how many jobs of the schema are not finished yet
// (available, running, retryable or scheduled): 0 once River has completed
// them all.
func RiverPGLeft(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`).Scan(&n)
	return n, err
}

// drainRiver subscribes to completions, starts client and returns the time
// from Start until n jobs were reported completed on River's event
// subscription (never by sleeping); then it stops the client.
func drainRiver[TTx any](ctx context.Context, client *river.Client[TTx], n int, timeout time.Duration) (time.Duration, error) {
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
		ChanSize: n + 1024, // never drop an event: a dropped one would hang the count
	})
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, fmt.Errorf("river start: %w", err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		client.Stop(sctx)
	}()
	for done := 0; done < n; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-ctx.Done():
			return 0, fmt.Errorf("river drain: %d of %d completed: %w", done, n, ctx.Err())
		}
	}
	return time.Since(start), nil
}
