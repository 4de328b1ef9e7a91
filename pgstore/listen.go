package pgstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
)

var _ turnframe.EnqueueListener = (*Store)(nil)

// The wake-ups across processes. A write that enqueues outbox rows (Apply,
// ApplyTx) issues pg_notify on the store's channel inside its transaction,
// so PostgreSQL delivers the notification when, and only if, it commits;
// every process listening on the database hears it (ListenEnqueued).
//
// The channel is named after the schema the store's tables are in
// (current_schema(), from the connection's search_path):
// "turnframe_enqueued_" and the MD5 of the schema's name, so that stores on
// different schemas of one database — parallel tests, tenants kept apart by
// schema — do not wake each other, and the name stays within PostgreSQL's
// 63 bytes whatever the schema's.
const (
	channelSQL = `SELECT current_database(), 'turnframe_enqueued_' || md5($1::text), current_setting('lock_timeout')`
	notifySQL  = `SELECT pg_notify($1, '')`
)

// enqueueChannel returns the database pool's connections use and the
// channel of the store in schema there, and the lock_timeout they have
// (sessionGuardSQL).
func enqueueChannel(ctx context.Context, pool *pgxpool.Pool, schema string) (database, ch, lockTimeout string, err error) {
	err = pool.QueryRow(ctx, channelSQL, schema).Scan(&database, &ch, &lockTimeout)
	return database, ch, lockTimeout, err
}

// applyAndNotify is apply, and the notification of its rows if it
// enqueued any, in tx.
func (s *Store) applyAndNotify(ctx context.Context, tx *wtx, w turnframe.Write) (turnframe.Applied, error) {
	applied, err := s.apply(ctx, tx, w)
	if err != nil || len(applied.Outbox) == 0 {
		return applied, err
	}
	tx.queue(wrapf("notify the enqueue"), notifySQL, s.channel)
	return applied, nil
}

// ListenEnqueued listens for the enqueues of every process on the store's
// schema (turnframe.EnqueueListener): it opens a connection of its own (not
// one of the pool's), LISTENs on the store's channel, and starts one
// goroutine that sends on wake (buffered, one value) for each commit that
// enqueued rows, its own process's included; a notification that finds the
// buffer full is merged with the one waiting.
//
// wake is closed when listening ends: when stop is called, when ctx ends,
// or when the connection fails (the server went away). stop ends listening,
// closes the connection, waits for the goroutine to return, and returns
// the error that ended listening (nil when stop or ctx did); calling it
// again returns the same. Notifications committed while no connection
// listens are not replayed: look for due rows after (re)starting.
//
// Errors: ErrClosed after Close, or when Close is called while it connects
// (Close does not wait for a connect that hangs); otherwise the
// connection's or the LISTEN's error, translated, and nothing is left
// running.
func (s *Store) ListenEnqueued(ctx context.Context) (wake <-chan struct{}, stop func() error, err error) {
	done, err := s.enter("listen")
	if err != nil {
		return nil, nil, err
	}
	defer done()
	cc := s.pool.Config().ConnConfig.Copy()
	// No statement runs while it waits: an ended context must end the
	// wait at once, not after a cancel request's grace (open.go).
	cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	// Close waits for this call: the connect and the LISTEN, which a
	// server that accepts and never answers holds until ctx ends, end when
	// Close is called too.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	conn, err := pgx.ConnectConfig(sctx, cc)
	if err != nil {
		return nil, nil, s.fail(ctx, "listen: connect", err)
	}
	if _, err := conn.Exec(sctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, s.fail(ctx, "listen", err)
	}
	l := &listener{conn: conn, wake: make(chan struct{}, 1)}
	lctx, cancel := context.WithCancel(ctx)
	l.wg.Go(func() { l.err = l.run(lctx) })
	return l.wake, l.stopper(cancel), nil
}

// listener is one ListenEnqueued's connection and goroutine.
type listener struct {
	conn *pgx.Conn
	wake chan struct{}
	wg   sync.WaitGroup
	err  error // why run returned; read after wg.Wait
}

// run forwards notifications until ctx ends or the connection fails, then
// closes the connection and wake.
func (l *listener) run(ctx context.Context) error {
	defer close(l.wake)
	defer l.conn.Close(context.WithoutCancel(ctx))
	for {
		if _, err := l.conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("pgstore: listen: %w", err)
		}
		select {
		case l.wake <- struct{}{}:
		default: // one is waiting already: it stands for this one too
		}
	}
}

// stopper returns listen's stop: cancel run, wait for it, report its error.
func (l *listener) stopper(cancel context.CancelFunc) func() error {
	var once sync.Once
	return func() error {
		once.Do(func() {
			cancel()
			l.wg.Wait()
		})
		return l.err
	}
}
