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

// seatBooking is a turn whose one command books a seat: its handler's
// Commit updates the application row 'seat' in its App, which another
// session of the app's (holder) keeps locked. Each App call hands its
// session's pid to pids before its statement, and the statement's error to
// appErrs.
type seatBooking struct {
	rt      *turnframe.Runtime
	turn    turnframe.TurnID
	holder  pgx.Tx
	calls   atomic.Int32 // the remote booked the seat
	pids    chan int32
	appErrs chan error
	mu      sync.Mutex
	now     time.Time
}

// newSeatBooking opens a store on the schema behind base, with params added
// to the store's URL, plans the booking and locks the seat.
func newSeatBooking(t *testing.T, base string, params url.Values) *seatBooking {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	b := &seatBooking{pids: make(chan int32, 100), appErrs: make(chan error, 100), now: time.Now()}
	u := base
	if len(params) > 0 {
		u = pgtest.WithParams(t, base, params)
	}
	s := mustOpenURL(t, u, pgstore.WithClock(pgstore.CallerClock))
	withAppTable(t, s)
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('seat', 'free')`)
	is.NoErr(err)
	b.rt = turnframe.New(s, turnframe.WithClock(b.clock))
	b.turn, err = b.rt.Receive(ctx, "acme", b.rt.NewConversationID(), "book the seat")
	is.NoErr(err)
	_, err = b.rt.Plan(ctx, "acme", b.turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "book"}}})
	is.NoErr(err)
	_, b.holder = lockHolder(t, base)
	_, err = b.holder.Exec(ctx, `UPDATE app_rows SET value = value WHERE key = 'seat'`)
	is.NoErr(err)
	return b
}

func (b *seatBooking) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

// Handle books the seat.
func (b *seatBooking) Handle(context.Context, turnframe.Call) turnframe.Outcome {
	b.calls.Add(1)
	return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "booked"}}).With(func(ctx context.Context, atx turnframe.Tx) error {
		ptx, _ := pgstore.PgxTx(atx)
		var pid int32
		if err := ptx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		b.pids <- pid
		_, err := ptx.Exec(ctx, `UPDATE app_rows SET value = 'booked' WHERE key = 'seat'`)
		b.appErrs <- err
		return err
	})
}

// execute runs the command on a goroutine and returns where its error comes.
func (b *seatBooking) execute() <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := b.rt.Execute(context.Background(), "acme", b.turn, b)
		done <- err
	}()
	return done
}

// settle waits for the App's first statement to fail, lets the holder go,
// and checks that Execute wrote the known outcome once the row was free:
// an Execute past the lease does not run the handler again.
func (b *seatBooking) settle(t *testing.T, done <-chan error) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	t.Logf("the App's first statement: %v", <-b.appErrs)
	is.NoErr(b.holder.Rollback(ctx))
	err := <-done
	t.Logf("Execute: %v (ErrBusy: %v, ErrAppWrite: %v)", err, errors.Is(err, turnframe.ErrBusy), errors.Is(err, turnframe.ErrAppWrite))
	b.mu.Lock()
	b.now = b.now.Add(10 * time.Minute) // past the attempt's lease
	b.mu.Unlock()
	res, err2 := b.rt.Execute(ctx, "acme", b.turn, b)
	t.Logf("second Execute: %+v %v", res, err2)
	is.Equal(b.calls.Load(), int32(1)) // the seat was booked once: its known outcome was written, not run again
	is.NoErr(err)                      // the refused statement was busy, and the outcome written once the row was free
}

// DESIGN.md §13: Open's connections wait at most DefaultLockTimeout for a
// lock: "a wait past it is ErrBusy, nothing written". A handler's Commit
// whose App updates an application row another session holds waits past
// the lock timeout. Apply used to say ErrAppWrite alone, so Execute gave
// the known outcome up at once, while its lease ran on for most of a
// minute, and the next Execute after the lease ran the handler again (§17
// row 1: a payment made twice). It is ErrBusy too now.
func TestAnAppStatementPastTheLockTimeoutIsBusyNotRunAgain(t *testing.T) {
	b := newSeatBooking(t, pgtest.Schema(t), nil)
	b.settle(t, b.execute())
}

// DESIGN.md §13: a statement a cancel request ended while its caller's
// context lives (an operator's pg_cancel_backend, a statement_timeout)
// rolled its transaction back: ErrBusy. A URL whose statement_timeout is
// shorter than lock_timeout ends the App's lock wait with 57014, not 55P03:
// Apply said ErrAppWrite alone, and the seat was booked twice.
func TestAnAppStatementCutByStatementTimeoutIsBusyNotRunAgain(t *testing.T) {
	b := newSeatBooking(t, pgtest.Schema(t), url.Values{"statement_timeout": {"1s"}})
	b.settle(t, b.execute())
}

// The same with the App's statement cancelled by an operator
// (pg_cancel_backend) while it waits for the lock.
func TestAnAppStatementCancelledByAnOperatorIsBusyNotRunAgain(t *testing.T) {
	endTheAppsLockWait(t, "pg_cancel_backend")
}

// endTheAppsLockWait books the seat with an App whose statement waits for a
// lock another session holds, has an operator's session call fn (a
// function of a backend's pid) on the App's backend once it waits, and
// asks that the booking then lands once.
func endTheAppsLockWait(t *testing.T, fn string) {
	is := is.New(t)
	ctx := context.Background()
	b := newSeatBooking(t, pgtest.Schema(t), nil)
	done := b.execute()
	pid := <-b.pids
	op, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	is.NoErr(err)
	defer op.Close(ctx)
	for waiting := false; !waiting; { // until the statement waits on the lock
		err := op.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		is.NoErr(err)
	}
	_, err = op.Exec(ctx, `SELECT `+fn+`($1)`, pid)
	is.NoErr(err)
	b.settle(t, done)
}

// The same with the App's session terminated while its statement waits for
// the lock (pg_terminate_backend: an operator ending what looks stuck, a
// failover). The connection is gone and the server rolled the transaction
// back, before any COMMIT: runApp promises ErrBusy for "a lost connection",
// but the App's statement met a FATAL error, not one marked lost, so Apply
// said ErrAppWrite alone, Execute gave the known outcome up, and the next
// Execute after the lease booked the seat again.
func TestAnAppStatementWhoseSessionIsTerminatedIsBusyNotRunAgain(t *testing.T) {
	endTheAppsLockWait(t, "pg_terminate_backend")
}
