package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// PGPoolConns is the pool size every PostgreSQL contender gets (the
// pool_max_conns of its URL): the same for pgstore and River, and small
// enough that three processes of each stay far below the server's 100
// connections.
const PGPoolConns = 10

// PGSchema is a schema of its own on the server, for one contender's run:
// URL connects to it (search_path) with a pool of PGPoolConns connections,
// and Drop removes it with everything in it.
type PGSchema struct {
	Name string
	URL  string
	base string
}

// NewPGSchema creates a fresh schema on the server at base (a
// postgres:// URL) and returns it.
func NewPGSchema(ctx context.Context, base string) (*PGSchema, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("pg url %q: want a postgres:// URL (%v)", base, err)
	}
	name := "bench_" + strings.ToLower(rand.Text())
	if err := pgExec(ctx, base, "CREATE SCHEMA "+name); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	q.Set("pool_max_conns", strconv.Itoa(PGPoolConns))
	u.RawQuery = q.Encode()
	return &PGSchema{Name: name, URL: u.String(), base: base}, nil
}

// Drop removes the schema and everything in it. Close every pool on it
// first.
func (s *PGSchema) Drop(ctx context.Context) error {
	return pgExec(ctx, s.base, "DROP SCHEMA "+s.Name+" CASCADE")
}

// pgExec runs one statement on a connection of its own.
func pgExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// PGServerInfo returns the server's version and its fsync and
// synchronous_commit settings, for the report.
func PGServerInfo(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var version, fsync, syncCommit, maxConns string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('max_connections')`).Scan(&version, &fsync, &syncCommit, &maxConns)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s, max_connections %s)", version, fsync, syncCommit, maxConns), nil
}

// PGStore is pgstore on a pool the bench owns (pgstore.New), configured
// as River's pool is, which counts the statements sent through it.
type PGStore struct {
	*pgstore.Store
	Statements *StatementCounter
}

// OpenPGStore opens pgstore on the schema (New applies its migrations).
func OpenPGStore(ctx context.Context, s *PGSchema) (*PGStore, error) {
	pool, count, err := NewPGPool(ctx, s.URL)
	if err != nil {
		return nil, err
	}
	st, err := pgstore.New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open pgstore: %w", err)
	}
	return &PGStore{Store: st, Statements: count}, nil
}

// Close closes the store, then its pool.
func (p *PGStore) Close() error {
	err := p.Store.Close()
	p.Pool().Close()
	return err
}

// StatementCounter is a pgx.QueryTracer and pgx.BatchTracer that counts
// the statements sent (BEGIN and COMMIT included), alone or in a batch.
type StatementCounter struct{ n atomic.Int64 }

// TraceQueryStart counts one statement.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing: the statements of a batch (one round trip)
// are counted one by one, by TraceBatchQuery.
func (c *StatementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts one statement of a batch.
func (c *StatementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

// TraceBatchEnd does nothing.
func (c *StatementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Load returns how many statements were counted.
func (c *StatementCounter) Load() int64 { return c.n.Load() }

// NewPGPool opens a pool on url whose statements are counted.
func NewPGPool(ctx context.Context, url string) (*pgxpool.Pool, *StatementCounter, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	count := &StatementCounter{}
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return pool, count, nil
}

// SeedPG inserts each batch of rows, in order, into pgstore's outbox
// through pool, shaped as Apply writes them (one turn row carries them all;
// ids are 26-digit numbers, valid ULID text; each batch shares one random
// 256-byte payload, stored uncompressed at that size), then marks held every Pending
// row an earlier row of its order key holds back, as the store does, and
// runs VACUUM ANALYZE, as autovacuum would have done on a table this size.
func SeedPG(ctx context.Context, pool *pgxpool.Pool, batches ...SeedRows) error {
	turn := fmt.Sprintf("%026d", 1)
	_, err := pool.Exec(ctx, `INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
VALUES ($1, $2, $1, 'seed', 'delivered', 0, 0) ON CONFLICT DO NOTHING`, turn, string(benchAccount))
	if err != nil {
		return fmt.Errorf("seed turn: %w", err)
	}
	for _, b := range batches {
		finished := int64(0)
		if b.Status == "completed" || b.Status == "failed" {
			finished = b.Due.UnixMicro()
		}
		for done := 0; done < b.N; {
			k := min(100_000, b.N-done)
			_, err := pool.Exec(ctx, `
INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status, attempts,
                    due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
SELECT lpad((base.b + x)::text, 26, '0'), $2, $3, 'seed-' || (base.b + x), 'bench', $4::bytea, $5, $6, 0,
       $7, '', 0, '', '', $7, $7, $8
FROM (SELECT coalesce(max(seq), 0) AS b FROM outbox) AS base, generate_series(1, $1::int) AS x`,
				k, string(benchAccount), turn, Payload(), b.OrderKey, b.Status, b.Due.UnixMicro(), finished)
			if err != nil {
				return fmt.Errorf("seed outbox: %w", err)
			}
			done += k
		}
	}
	_, err = pool.Exec(ctx, `UPDATE outbox AS o SET held = true
WHERE o.status = 'pending' AND o.order_key <> '' AND EXISTS (
	SELECT 1 FROM outbox AS p WHERE p.account = o.account AND p.order_key = o.order_key
	  AND p.seq < o.seq AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`)
	if err != nil {
		return fmt.Errorf("seed held marks: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("seed vacuum: %w", err)
	}
	return nil
}

// CountStatusPG returns how many outbox rows of pool's schema have status.
func CountStatusPG(ctx context.Context, pool *pgxpool.Pool, status string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status = $1`, status).Scan(&n)
	return n, err
}

// CheckCommittedPG is CheckCommitted for a fixture built in pgstore.
func (fx *EnqueueFixture) CheckCommittedPG(ctx context.Context, pool *pgxpool.Pool) error {
	var turns, committed int
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE phase = 'committed') FROM turns`).Scan(&turns, &committed)
	if err != nil {
		return err
	}
	if want := (len(fx.Commits) + cmdsPerTurn - 1) / cmdsPerTurn; turns != want || committed != want {
		return fmt.Errorf("%d turns, %d of them committed, want %d and %d", turns, committed, want, want)
	}
	return nil
}

// pgAppSchema is the application table of the PostgreSQL enqueue-in-tx
// contenders that write an application row of their own.
const pgAppSchema = `CREATE TABLE IF NOT EXISTS app_rows (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, payload bytea NOT NULL)`

// RawPG is the PostgreSQL ceiling of enqueue-in-tx: an application row and
// a row shaped like pgstore's outbox row, two INSERTs in one transaction.
type RawPG struct {
	Pool *pgxpool.Pool
	seq  int
}

// OpenRawPG makes the two tables in the schema.
func OpenRawPG(ctx context.Context, s *PGSchema) (*RawPG, error) {
	pool, err := pgxpool.New(ctx, s.URL)
	if err != nil {
		return nil, err
	}
	_, err = pool.Exec(ctx, pgAppSchema+`;
CREATE TABLE raw_outbox (seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, id text COLLATE "C" NOT NULL UNIQUE,
	payload bytea NOT NULL, status text NOT NULL, due_at bigint NOT NULL);
CREATE INDEX raw_outbox_due ON raw_outbox (due_at, seq) WHERE status = 'pending'`)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("raw schema: %w", err)
	}
	return &RawPG{Pool: pool}, nil
}

// Enqueue writes the two rows in one transaction.
func (r *RawPG) Enqueue(ctx context.Context, payload []byte) error {
	r.seq++
	id := fmt.Sprintf("%026d", r.seq)
	return pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO app_rows (payload) VALUES ($1)`, payload); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO raw_outbox (id, payload, status, due_at) VALUES ($1, $2, 'pending', $3)`,
			id, payload, time.Now().UnixMicro())
		return err
	})
}

// Close closes the pool.
func (r *RawPG) Close() { r.Pool.Close() }

// AddAppRows makes every commit of fx also insert one 256-byte row into the
// application's own table (created here, in st's schema) through the
// Write's own transaction (Write.App, pgstore.PgxTx): the app's row commits
// with the outbox row or not at all.
func AddAppRows(ctx context.Context, st *pgstore.Store, fx *EnqueueFixture) error {
	if _, err := st.Pool().Exec(ctx, pgAppSchema); err != nil {
		return fmt.Errorf("app table: %w", err)
	}
	payload := Payload()
	app := func(ctx context.Context, tx turnframe.Tx) error {
		ptx, ok := pgstore.PgxTx(tx)
		if !ok {
			return fmt.Errorf("app write: a %s transaction, want postgres", tx.Backend())
		}
		_, err := ptx.Exec(ctx, `INSERT INTO app_rows (payload) VALUES ($1)`, payload)
		return err
	}
	for i := range fx.Commits {
		fx.Commits[i].App = app
	}
	return nil
}
