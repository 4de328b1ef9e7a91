package crashtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/crashtest/harness"
	"github.com/turnframe/turnframe/sqlitestore"
)

var _ harness.Backend = sqliteBackend{}

// sqliteBackend runs the harness on one SQLite file per run.
type sqliteBackend struct{}

func (sqliteBackend) Name() string { return "sqlitestore" }

// Create creates and migrates the run's file in t's temporary directory.
func (sqliteBackend) Create(t testing.TB) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "crash.db")
	store, err := sqlitestore.Open(context.Background(), db)
	if err != nil {
		t.Fatalf("create %s: %v", db, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

// Open opens the file with the busy timeout use asks for: the dispatcher's
// short one makes a held file ErrBusy.
func (sqliteBackend) Open(ctx context.Context, db string, use harness.Use) (turnframe.Store, error) {
	var opts []sqlitestore.Option
	switch use {
	case harness.UseRuntime:
		opts = []sqlitestore.Option{sqlitestore.WithBusyTimeout(harness.StoreBusyTimeout)}
	case harness.UseDispatcher:
		opts = []sqlitestore.Option{sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(harness.DispatchBusyTimeout)}
	case harness.UseActor:
		opts = []sqlitestore.Option{sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(harness.StoreBusyTimeout)}
	case harness.UseFill:
		opts = []sqlitestore.Option{sqlitestore.WithSynchronousNormal()}
	case harness.UseAudit:
		opts = []sqlitestore.Option{sqlitestore.WithExisting()}
	}
	s, err := sqlitestore.Open(ctx, db, opts...)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// appTableSQL is the application's table: one row per commit a handler
// made, naming the attempt and the worker. No UNIQUE constraint: the audit
// counts duplicates rather than have the app's writes refuse them.
const appTableSQL = `CREATE TABLE IF NOT EXISTS app_commits (
	id      INTEGER PRIMARY KEY,
	account TEXT NOT NULL,
	key     TEXT NOT NULL,
	attempt TEXT NOT NULL,
	worker  TEXT NOT NULL
) STRICT`

func (sqliteBackend) CreateAppTable(ctx context.Context, s turnframe.Store) error {
	tx, err := s.(*sqlitestore.Store).BeginTx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, appTableSQL); err != nil {
		return err
	}
	return tx.Commit()
}

func (sqliteBackend) InsertAppRow(ctx context.Context, tx turnframe.Tx, r harness.AppRow) error {
	sqlTx, ok := sqlitestore.SQLTx(tx)
	if !ok {
		return fmt.Errorf("not a sqlitestore transaction: %T", tx)
	}
	_, err := sqlTx.ExecContext(ctx, `INSERT INTO app_commits (account, key, attempt, worker) VALUES (?, ?, ?, ?)`,
		r.Account, r.Key, r.Attempt, r.Worker)
	return err
}

func (sqliteBackend) Query(ctx context.Context, s turnframe.Store, query string, each func(scan func(dest ...any) error) error) error {
	rows, err := s.(*sqlitestore.Store).ReadDB().QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	return harness.EachRow(rows, each)
}

// Integrity runs PRAGMA integrity_check.
func (sqliteBackend) Integrity(ctx context.Context, s turnframe.Store) (string, error) {
	var verdict string
	err := s.(*sqlitestore.Store).ReadDB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&verdict)
	return verdict, err
}

// Locker holds the file's write lock on a plain connection of its own
// (BEGIN IMMEDIATE), past the dispatcher's busy timeout.
func (sqliteBackend) Locker(ctx context.Context, db string) (harness.Locker, error) {
	lockDB, err := sql.Open("sqlite", sqliteDSN(db, url.Values{"_pragma": {"busy_timeout(100)"}}))
	if err != nil {
		return nil, err
	}
	return fileLocker{lockDB}, nil
}

// sqliteDSN is a DSN for the "sqlite" driver, escaped as sqlitestore does.
func sqliteDSN(path string, params url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + params.Encode()
}

type fileLocker struct{ db *sql.DB }

func (l fileLocker) Hold(ctx context.Context) (func(), error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		return nil, err
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
	}, nil
}

func (l fileLocker) Close() error { return l.db.Close() }
