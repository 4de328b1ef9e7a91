package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DESIGN.md §13: a statement a cancel request ended while its caller's
// context lives (an operator's pg_cancel_backend, a statement_timeout) rolled
// its transaction back: ErrBusy. An App statement refused for a lock wraps
// ErrBusy too (RELIABILITY §18 row 7), but a URL whose statement_timeout is
// shorter than lock_timeout ends the App's lock wait with 57014, not 55P03:
// Apply said ErrAppWrite alone, Execute gave the known outcome up at once,
// and the next Execute after the lease ran the handler again — the seat
// booked twice.
func TestAnAppStatementCutByStatementTimeoutIsBusyNotRunAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	base := pgtest.Schema(t)
	u := pgtest.WithParams(t, base, url.Values{"statement_timeout": {"1s"}})
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := mustOpenURL(t, u, pgstore.WithClock(pgstore.CallerClock))
	withAppTable(t, s)
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('seat', 'free')`)
	is.NoErr(err)

	rt := turnframe.New(s, turnframe.WithClock(clock))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book the seat")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "book"}}})
	is.NoErr(err)

	_, tx := lockHolder(t, base)
	_, err = tx.Exec(ctx, `UPDATE app_rows SET value = value WHERE key = 'seat'`)
	is.NoErr(err)

	var calls atomic.Int32
	appErrs := make(chan error, 100)
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		calls.Add(1)
		return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "booked"}}).With(func(ctx context.Context, atx turnframe.Tx) error {
			ptx, _ := pgstore.PgxTx(atx)
			_, err := ptx.Exec(ctx, `UPDATE app_rows SET value = 'booked' WHERE key = 'seat'`)
			appErrs <- err
			return err
		})
	})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(ctx, "acme", turn, h)
		done <- err
	}()
	first := <-appErrs
	t.Logf("the App's first statement: %v", first)
	is.NoErr(tx.Rollback(ctx))
	err = <-done
	t.Logf("Execute: %v (ErrBusy: %v, ErrAppWrite: %v)", err, errors.Is(err, turnframe.ErrBusy), errors.Is(err, turnframe.ErrAppWrite))

	mu.Lock()
	now = now.Add(10 * time.Minute)
	mu.Unlock()
	res2, err2 := rt.Execute(ctx, "acme", turn, h)
	t.Logf("second Execute: %+v %v", res2, err2)
	is.Equal(calls.Load(), int32(1)) // the seat was booked once
	is.NoErr(err)
}

// The same with the App's statement cancelled by an operator
// (pg_cancel_backend, 57014 under a live context: DESIGN §13 names it) while
// it waits for the lock: the transaction rolled back, nothing written, yet
// Apply says ErrAppWrite alone and the handler runs again.
func TestAnAppStatementCancelledByAnOperatorIsBusyNotRunAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := mustOpenURL(t, u, pgstore.WithClock(pgstore.CallerClock))
	withAppTable(t, s)
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('seat', 'free')`)
	is.NoErr(err)

	rt := turnframe.New(s, turnframe.WithClock(clock))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book the seat")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "book"}}})
	is.NoErr(err)

	_, tx := lockHolder(t, u)
	_, err = tx.Exec(ctx, `UPDATE app_rows SET value = value WHERE key = 'seat'`)
	is.NoErr(err)

	var calls atomic.Int32
	appErrs := make(chan error, 100)
	pids := make(chan int32, 100)
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		calls.Add(1)
		return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "booked"}}).With(func(ctx context.Context, atx turnframe.Tx) error {
			ptx, _ := pgstore.PgxTx(atx)
			var pid int32
			if err := ptx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			pids <- pid
			_, err := ptx.Exec(ctx, `UPDATE app_rows SET value = 'booked' WHERE key = 'seat'`)
			appErrs <- err
			return err
		})
	})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(ctx, "acme", turn, h)
		done <- err
	}()
	pid := <-pids
	// The operator cancels the waiting statement once it waits on the lock.
	op, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	is.NoErr(err)
	defer op.Close(ctx)
	for {
		var waiting bool
		err := op.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		is.NoErr(err)
		if waiting {
			break
		}
	}
	_, err = op.Exec(ctx, `SELECT pg_cancel_backend($1)`, pid)
	is.NoErr(err)
	first := <-appErrs
	t.Logf("the App's first statement: %v", first)
	is.NoErr(tx.Rollback(ctx))
	err = <-done
	t.Logf("Execute: %v (ErrBusy: %v, ErrAppWrite: %v)", err, errors.Is(err, turnframe.ErrBusy), errors.Is(err, turnframe.ErrAppWrite))

	mu.Lock()
	now = now.Add(10 * time.Minute)
	mu.Unlock()
	res2, err2 := rt.Execute(ctx, "acme", turn, h)
	t.Logf("second Execute: %+v %v", res2, err2)
	is.Equal(calls.Load(), int32(1)) // the seat was booked once
	is.NoErr(err)
}
