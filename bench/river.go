package bench

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverArgs is the job River contenders insert: a 256-character string,
// since River's args are JSON (256 raw bytes would be 344 in base64).
type RiverArgs struct {
	Payload string `json:"payload"`
}

// Kind implements river.JobArgs.
func (RiverArgs) Kind() string { return "bench_noop" }

// riverWorker does nothing: a no-op sender.
type riverWorker struct {
	river.WorkerDefaults[RiverArgs]
}

func (riverWorker) Work(context.Context, *river.Job[RiverArgs]) error { return nil }

// RiverPayload returns a 256-character payload for RiverArgs.
func RiverPayload() string { return hex.EncodeToString(Payload()[:PayloadSize/2]) }

// RiverMaxWorkers is the River queue's worker count in the drain: River
// fetches at most this many jobs at once, like turnframe's batch of 16.
const RiverMaxWorkers = 16

// River is River on its SQLite driver over one file, with the
// single-connection pool its driver documentation advises.
type River struct {
	DB     *sql.DB
	Client *river.Client[*sql.Tx]
}

// OpenRiver migrates River's schema into a fresh file and makes a client.
// With work it is configured to work the default queue with
// RiverMaxWorkers no-op workers, fetching as eagerly as River allows
// (FetchCooldown at its 1 ms minimum, polling every 10 ms: SQLite has no
// LISTEN/NOTIFY, so River finds new jobs by polling); without, it is an
// insert-only client.
func OpenRiver(ctx context.Context, path string, s Sync, work bool) (*River, error) {
	db, err := OpenDB(ctx, path, s, false, 1)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, appSchema); err != nil {
		db.Close()
		return nil, err
	}
	driver := riversqlite.New(db)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		db.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	cfg := &river.Config{Logger: quietLogger()}
	if work {
		workers := river.NewWorkers()
		river.AddWorker(workers, &riverWorker{})
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: RiverMaxWorkers}}
		cfg.FetchCooldown = river.FetchCooldownMin
		cfg.FetchPollInterval = 10 * time.Millisecond
	}
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &River{DB: db, Client: client}, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Close closes the file.
func (r *River) Close() error { return r.DB.Close() }

// Enqueue is River's enqueue-in-tx: the application row and InsertTx in one
// transaction.
func (r *River) Enqueue(ctx context.Context, payload []byte, args RiverArgs) error {
	return inTx(ctx, r.DB, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_rows (payload) VALUES (?)`, payload); err != nil {
			return err
		}
		_, err := r.Client.InsertTx(ctx, tx, args, nil)
		return err
	})
}

// Seed inserts n jobs with InsertManyTx, 1000 per transaction (untimed).
func (r *River) Seed(ctx context.Context, n int) error {
	for done := 0; done < n; {
		k := min(1000, n-done)
		params := make([]river.InsertManyParams, k)
		for i := range params {
			params[i] = river.InsertManyParams{Args: RiverArgs{Payload: RiverPayload()}}
		}
		err := inTx(ctx, r.DB, func(tx *sql.Tx) error {
			_, err := r.Client.InsertManyTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return fmt.Errorf("river seed: %w", err)
		}
		done += k
	}
	return nil
}

// Drain starts the client and returns how long it took until n jobs were
// reported completed on River's event subscription; then it stops the
// client. Completion is counted from the subscription, never by sleeping.
func (r *River) Drain(ctx context.Context, n int, timeout time.Duration) (time.Duration, error) {
	elapsed, err := drainRiver(ctx, r.Client, n, timeout)
	if err != nil {
		return 0, err
	}
	var left int
	if err := r.DB.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state <> 'completed'`).Scan(&left); err != nil {
		return 0, err
	}
	if left != 0 {
		return 0, fmt.Errorf("river drain: %d jobs not completed after %d completion events", left, n)
	}
	return elapsed, nil
}
