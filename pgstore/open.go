package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/turnframe/turnframe"
)

// DefaultLockTimeout is the lock_timeout Open gives its connections when
// the URL sets none: how long a statement waits for a lock another session
// holds (a row, an order key) before it fails with turnframe.ErrBusy,
// nothing written. It is sqlitestore's DefaultBusyTimeout, for the same
// reason: a write of the library's waiting for a session that keeps its
// transaction open (an app's, an operator's in psql, a client that died
// mid-transaction) would otherwise wait as long as that session, and with
// it a recovery pass or a dispatcher's settlement, for every tenant.
const DefaultLockTimeout = 5 * time.Second

// Open connects to the database at url (a PostgreSQL URL or key=value
// string, as pgxpool.ParseConfig reads it; runtime parameters such as
// search_path may be given in it), applies the schema (Migrate; with
// WithExisting it only checks it) and returns
// the store, which owns the pool: Close closes it. Its connections wait
// DefaultLockTimeout for a lock unless the url sets lock_timeout (0: for
// ever). Open starts no goroutine
// of its own (pgxpool keeps its health check running until Close).
//
// Errors: ErrInvalid for an empty or unparsable url, or a database New
// refuses by its encoding; otherwise the error of the connection or of a
// migration, translated (a context error stays one).
// A server that refuses the connection for good (a database or role it does
// not know, a failed authentication) is its own error, naming the server's
// words, never ErrBusy; one that refuses it for now (the database system
// is starting up, shutting down or recovering: 57P03) is ErrBusy, so that
// an application started with its database may try again. Once open, a
// connection that cannot be opened is ErrBusy whatever the cause: a
// settlement must outlast a pg_hba.conf reload or a database restarting,
// not be given up.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	if url == "" {
		return nil, &turnframe.InvalidError{Field: "url", Reason: "empty"}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &turnframe.InvalidError{Field: "url", Reason: err.Error()}
	}
	// A context that ends mid-statement cancels the statement on the
	// server (a cancel request), not the connection: an App's transaction
	// (BeginTx, ApplyTx) survives a cancelled call, rolled back to its
	// savepoint. Only a server that does not answer the request within
	// the delay has its connection closed.
	if !SetsSetting(cfg.ConnConfig.RuntimeParams, "lock_timeout") {
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(DefaultLockTimeout.Milliseconds())
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", translate(ctx, err))
	}
	s, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// New returns a store on pool, a pool the application owns (its own tables
// may live in the same database, and its App writes run on the store's
// transaction, PgxTx). New applies the schema first, as Open does (Migrate:
// idempotent, and safe when several processes start at once), so a store
// is never used on a schema it does not know (WithExisting: checks it,
// changing nothing). Close leaves pool open.
//
// The store's tables are in the first schema of the pool's search_path as
// New finds it (current_schema()), and every statement of the store names
// that schema: what the application leaves on a pooled connection later —
// a search_path SET for its own tables, a temporary table of one of the
// store's table names — never leads the store elsewhere (tables.go).
//
// A pool of the application's keeps its own settings. Open's pool answers
// an ended context by cancelling the statement on the server
// (pgconn.CancelRequestContextWatcherHandler), not by closing the
// connection, so that a transaction of the caller's survives a cancelled
// ApplyTx; set ConnConfig.BuildContextWatcherHandler alike for the same.
// Open's pool also waits at most DefaultLockTimeout for a lock; give the
// pool's connections a lock_timeout (RuntimeParams) for the same bound.
// Each write transaction of the store keeps the lock_timeout New found,
// and commits durably (synchronous_commit at least on), whatever a plain
// SET of the application's left on the session (settings.go).
//
// Errors: ErrInvalid for a nil pool, or for a database whose encoding
// converts text (neither UTF8 nor SQL_ASCII: its strings would not read
// back as written); otherwise the error of a migration, or with
// WithExisting a *SchemaError for a schema that is not this build's.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, &turnframe.InvalidError{Field: "pool", Reason: "nil"}
	}
	cfg := newConfig(opts)
	if err := checkServerEncoding(ctx, pool); err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	migrate := migrate
	if cfg.existing {
		migrate = checkExisting
	}
	schema, err := migrate(ctx, pool)
	if err != nil {
		terr := translate(ctx, err)
		var pe *goose.PartialError
		if errors.Is(terr, turnframe.ErrBusy) && errors.As(err, &pe) && len(pe.Applied) > 0 {
			// Some migrations were committed before the one cut: not
			// ErrBusy's "nothing was written".
			terr = err
		}
		return nil, fmt.Errorf("pgstore: open: %w", terr)
	}
	database, channel, lockTimeout, err := enqueueChannel(ctx, pool, schema)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", translate(ctx, err))
	}
	closing, endAll := context.WithCancel(context.Background())
	s := &Store{pool: pool, ids: cfg.ids, retries: cfg.retries, clock: cfg.clock, host: cfg.host, channel: channel, schema: schema, database: database,
		lockTimeout: lockTimeout, qualify: qualifier(schema), closing: closing, endAll: endAll}
	s.db = s.on(readPool{pool})
	return s, nil
}
