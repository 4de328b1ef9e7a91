package pgcrash_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/crashtest/harness"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

var _ harness.Backend = pgBackend{}

// pgBackend runs the harness on one PostgreSQL schema per run, every
// child process on it at once. The stores run on the database clock (the
// default), as several hosts would.
type pgBackend struct{}

func (pgBackend) Name() string { return "pgstore" }

// Create makes a schema of its own on the test server (pgtest.Schema),
// dropped when t ends, migrates it and creates the application's table in
// it, and returns the server URL with the schema as search_path.
func (pgBackend) Create(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	db := pgtest.Schema(t)
	s, err := pgstore.Open(ctx, db)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer s.Close()
	// Here, once: CREATE TABLE IF NOT EXISTS run by several sessions at
	// once can fail on PostgreSQL's catalog.
	if err := createAppTable(ctx, s); err != nil {
		t.Fatalf("create the app table: %v", err)
	}
	return db
}

// poolSizes keeps a run's connections well under the server's
// max_connections: up to five children at once, three stores each.
var poolSizes = map[harness.Use]string{
	harness.UseRuntime: "4", harness.UseDispatcher: "4", harness.UseActor: "2", harness.UseFill: "2", harness.UseAudit: "2",
}

// Open opens a pgstore on db. The dispatcher's store gives up on a lock
// after harness.DispatchBusyTimeout (lock_timeout: turnframe.ErrBusy), as
// the SQLite dispatcher's busy timeout does; the others wait for locks.
func (pgBackend) Open(ctx context.Context, db string, use harness.Use) (turnframe.Store, error) {
	u, err := url.Parse(db)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("pool_max_conns", poolSizes[use])
	if use == harness.UseDispatcher {
		q.Set("lock_timeout", fmt.Sprint(harness.DispatchBusyTimeout.Milliseconds()))
	}
	u.RawQuery = q.Encode()
	s, err := pgstore.Open(ctx, u.String())
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// appTableSQL is the application's table: one row per commit a handler
// made, naming the attempt and the worker. No UNIQUE constraint: the audit
// counts duplicates rather than have the app's writes refuse them.
const appTableSQL = `CREATE TABLE IF NOT EXISTS app_commits (
	id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	account text NOT NULL,
	key     text NOT NULL,
	attempt text NOT NULL,
	worker  text NOT NULL
)`

func createAppTable(ctx context.Context, s *pgstore.Store) error {
	_, err := s.Pool().Exec(ctx, appTableSQL)
	return err
}

// CreateAppTable has nothing left to do: Create made the table.
func (pgBackend) CreateAppTable(ctx context.Context, s turnframe.Store) error {
	return createAppTable(ctx, s.(*pgstore.Store))
}

func (pgBackend) InsertAppRow(ctx context.Context, tx turnframe.Tx, r harness.AppRow) error {
	pgxTx, ok := pgstore.PgxTx(tx)
	if !ok {
		return fmt.Errorf("not a pgstore transaction: %T", tx)
	}
	_, err := pgxTx.Exec(ctx, `INSERT INTO app_commits (account, key, attempt, worker) VALUES ($1, $2, $3, $4)`,
		r.Account, r.Key, r.Attempt, r.Worker)
	return err
}

func (pgBackend) Query(ctx context.Context, s turnframe.Store, query string, each func(scan func(dest ...any) error) error) error {
	rows, err := s.(*pgstore.Store).Pool().Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	return harness.EachRow(rows, each)
}

// Integrity: PostgreSQL has no check the harness can run without an
// extension (amcheck), which it may not install in a shared database.
func (pgBackend) Integrity(context.Context, turnframe.Store) (string, error) {
	return harness.NoIntegrityCheck, nil
}

// Locker holds the outbox table in EXCLUSIVE mode on a connection of its
// own: reads go on, but every claim, extension, settlement and expiry waits,
// and the dispatcher's give up busy after its lock_timeout.
func (pgBackend) Locker(ctx context.Context, db string) (harness.Locker, error) {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	return &tableLocker{conn: conn}, nil
}

// tableLocker holds the lock in a transaction of its own. The mutex orders
// Hold, the release and Close, which come from different goroutines.
type tableLocker struct {
	mu   sync.Mutex
	conn *pgx.Conn
}

func (l *tableLocker) Hold(ctx context.Context) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	// Another process's lock, or a long write, may hold the table: give up
	// soon rather than take it late.
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = 100"); err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE outbox IN EXCLUSIVE MODE")
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		_ = tx.Rollback(context.Background())
	}, nil
}

func (l *tableLocker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn.Close(context.Background())
}
