package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DESIGN.md §13: Open's connections wait at most DefaultLockTimeout for a
// lock: "a wait past it is ErrBusy, nothing written". A handler's Commit
// whose App updates an application row another session holds (the app's
// own transaction, open a few seconds) waits past the lock timeout. Apply
// used to say ErrAppWrite alone, so Execute gave the known outcome up at
// once, while its lease ran on for most of a minute, and the next Execute
// after the lease ran the handler again (§17 row 1: a payment made twice).
// It is ErrBusy too now, and the outcome is written once the row is free.
func TestAnAppStatementPastTheLockTimeoutIsBusyNotRunAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := mustOpenURL(t, url, pgstore.WithClock(pgstore.CallerClock))
	withAppTable(t, s)
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('seat', 'free')`)
	is.NoErr(err)

	rt := turnframe.New(s, turnframe.WithClock(clock))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book the seat")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "book"}}})
	is.NoErr(err)

	// Another session of the app's holds the seat's row for a while.
	_, tx := lockHolder(t, url)
	_, err = tx.Exec(ctx, `UPDATE app_rows SET value = value WHERE key = 'seat'`)
	is.NoErr(err)

	var calls atomic.Int32
	appErrs := make(chan error, 100)
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		calls.Add(1) // the remote booked the seat
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
	// The App's statement gives up waiting (lock_timeout); then the other
	// session ends, well inside the attempt's lease.
	first := <-appErrs
	t.Logf("the App's first statement: %v", first)
	is.NoErr(tx.Rollback(ctx))
	err = <-done
	t.Logf("Execute: %v (ErrBusy: %v, ErrAppWrite: %v)", err, errors.Is(err, turnframe.ErrBusy), errors.Is(err, turnframe.ErrAppWrite))

	// Later, past the lease, the command is executed again.
	mu.Lock()
	now = now.Add(10 * time.Minute)
	mu.Unlock()
	res2, err2 := rt.Execute(ctx, "acme", turn, h)
	t.Logf("second Execute: %+v %v", res2, err2)
	is.Equal(calls.Load(), int32(1)) // the seat was booked once: its known outcome was written, not run again
	is.NoErr(err)                    // the wait past lock_timeout was busy, and the outcome written once the row was free
}
