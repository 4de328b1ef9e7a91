package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// watched is a store that reports the size of every claim it answers, so a
// test knows when Run is idle.
type watched struct {
	*pgstore.Store
	claims chan int
}

func (w watched) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := w.Store.ClaimDue(ctx, now, limit, worker, lease)
	if err == nil {
		select {
		case w.claims <- len(claims):
		default:
		}
	}
	return claims, err
}

// await returns the next value of ch, or fails t after a generous deadline.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing within 30 s", what)
		var zero T
		return zero
	}
}

// idleRun starts Dispatcher.Run on a, polling once an hour, with a sender
// that hands each row it is given to the returned channel, and waits until
// Run is idle (its claim at start and the one after its first release found
// nothing), so that only a wake-up can make it claim again. stop ends Run
// and returns its error.
func idleRun(t *testing.T, a *pgstore.Store) (sent <-chan turnframe.OutboxEntry, stop func() error) {
	t.Helper()
	w := watched{Store: a, claims: make(chan int, 64)}
	out := make(chan turnframe.OutboxEntry, 16)
	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		out <- e
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	cfg := turnframe.DefaultDispatchConfig("listener")
	cfg.PollInterval = time.Hour // only a wake-up finds a row
	d := turnframe.NewDispatcher(w, sender, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { stop() })
	if n := await(t, w.claims, "the claim at start"); n != 0 {
		t.Fatalf("claimed %d rows at start, want none", n)
	}
	// Then one claim once listening (Run listens on a goroutine of its
	// own) and one after the first release, in either order.
	for _, which := range []string{"the second claim", "the third claim"} {
		if n := await(t, w.claims, which); n != 0 {
			t.Fatalf("%s claimed %d rows, want none", which, n)
		}
	}
	return out, stop
}

// Run on one store wakes when another store — another pool, as another
// process would have — commits rows on the same schema: PostgreSQL's
// notification is the only thing that can wake it within the hour.
func TestRunWakesOnAnotherProcesssEnqueue(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	sent, stop := idleRun(t, a)
	is.NoErr(enqueueRows(ctx, b, turnframe.NewIDGenerator(), "acme", "k1", time.Now(), turnframe.OutboxMessage{Destination: "payments"})) // the other store enqueues
	e := await(t, sent, "the send of the other store's row")
	is.Equal(e.Key, turnframe.IdempotencyKey("k1")) // the row was sent
	is.NoErr(stop())                                // Run ends cleanly
}

// A listener whose connection is lost does not stop Run: it polls, listens
// again after a backoff, and then finds what was enqueued meanwhile.
func TestRunListensAgainAfterItsConnectionIsLost(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	sent, stop := idleRun(t, a)
	var killed int
	err := a.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || md5(current_schema()) || '%'`).Scan(&killed)
	is.NoErr(err)                                                                                                                         // end the listener's connection, as a server restart would
	is.Equal(killed, 1)                                                                                                                   // Run's one listener
	is.NoErr(enqueueRows(ctx, b, turnframe.NewIDGenerator(), "acme", "k1", time.Now(), turnframe.OutboxMessage{Destination: "payments"})) // enqueued while nothing may listen
	e := await(t, sent, "the send after listening again")
	is.Equal(e.Key, turnframe.IdempotencyKey("k1")) // found once Run listened again
	is.NoErr(stop())                                // Run ends cleanly
}

// ListenEnqueued hears a commit of another store on the schema, and its
// stop ends listening: wake is closed once stop returns.
func TestListenEnqueued(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	wake, stop, err := a.ListenEnqueued(ctx)
	is.NoErr(err)                                                                                                                         // listening
	is.NoErr(enqueueRows(ctx, b, turnframe.NewIDGenerator(), "acme", "k1", time.Now(), turnframe.OutboxMessage{Destination: "payments"})) // the other store enqueues
	await(t, wake, "the notification")
	is.NoErr(stop()) // stopped
	_, open := <-wake
	is.True(!open)   // wake is closed
	is.NoErr(stop()) // a second stop is harmless
}
