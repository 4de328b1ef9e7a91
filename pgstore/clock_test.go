package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// host is one machine of a test: a store of its own (its own pool) on the
// shared schema, and the machine's clock.
type host struct {
	store *pgstore.Store
	clock func() time.Time
}

// now reads the host's clock as turnframe does: UTC, to the microsecond.
func (h host) now() time.Time { return h.clock().UTC().Truncate(time.Microsecond) }

// skewedHosts opens two hosts on one fresh schema, in mode: one whose clock
// runs an hour ahead of the real time, one an hour behind.
func skewedHosts(t *testing.T, mode pgstore.Clock) (ahead, behind host) {
	t.Helper()
	url := pgtest.Schema(t)
	open := func(skew time.Duration) host {
		clock := func() time.Time { return time.Now().Add(skew) }
		return host{store: mustOpenURL(t, url, pgstore.WithClock(mode), pgstore.WithHostClock(clock)), clock: clock}
	}
	return open(time.Hour), open(-time.Hour)
}

// pollUntil calls done every few milliseconds until it reports true, and
// fails t if it has not by the deadline.
func pollUntil(t *testing.T, what string, within time.Duration, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by the deadline (%v)", what, within)
		}
		<-tick.C
	}
}

// A row claimed by a host whose clock is an hour behind is not expired,
// claimed or released by a host whose clock is an hour ahead while the
// lease runs on the database's clock, and its claimer settles it. On the
// callers' clocks (the control) the host ahead expires it at once.
func TestDatabaseClockKeepsAClaimFromAHostAhead(t *testing.T) {
	tests := []struct {
		mode    pgstore.Clock
		expired int // rows the host ahead expires at once
	}{
		{mode: pgstore.DatabaseClock, expired: 0},
		{mode: pgstore.CallerClock, expired: 1},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			ahead, behind := skewedHosts(t, tc.mode)
			ids := turnframe.NewIDGenerator()
			is.NoErr(enqueueRows(ctx, behind.store, ids, "acme", "k1", behind.now(), turnframe.OutboxMessage{Destination: "payments"})) // one row

			claims, err := behind.store.ClaimDue(ctx, behind.now(), 10, "behind", time.Minute)
			is.NoErr(err)                                     // the host behind claims
			is.Equal(len(claims), 1)                          // the row
			is.True(claims[0].LeaseUntil.After(behind.now())) // its lease runs, on its own clock

			expired, err := ahead.store.ExpireClaims(ctx, ahead.now())
			is.NoErr(err)                      // the host ahead releases ended leases
			is.Equal(len(expired), tc.expired) // none on the database's clock
			if tc.expired > 0 {
				return // the control: the callers' clocks disagree, and the claim was lost
			}
			rec, err := ahead.store.GetOutbox(ctx, claims[0].ID)
			is.NoErr(err)                                     // the host ahead reads the row
			is.Equal(rec.Status, turnframe.OutboxDispatching) // still claimed
			is.True(rec.LeaseUntil.After(ahead.now()))        // and its lease runs on the clock of the host ahead too
			more, err := ahead.store.ClaimDue(ctx, ahead.now(), 10, "ahead", time.Minute)
			is.NoErr(err)          // the host ahead claims
			is.Equal(len(more), 0) // nothing: the row is held
			results, err := behind.store.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: behind.now()}})
			is.NoErr(err)        // the settlement's transaction
			is.NoErr(results[0]) // the claimer still held the row
		})
	}
}

// A lease does end, for every host, when the database's clock says: a
// claim of 300 ms by either host is expired by the other soon after, on
// real time, whichever way their clocks are skewed.
func TestDatabaseClockEndsALeaseForEveryHost(t *testing.T) {
	tests := []struct {
		name    string
		claimer func(ahead, behind host) (claimer, expirer host)
	}{
		{name: "ClaimedBehindExpiredAhead", claimer: func(a, b host) (host, host) { return b, a }},
		{name: "ClaimedAheadExpiredBehind", claimer: func(a, b host) (host, host) { return a, b }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			claimer, expirer := tc.claimer(skewedHosts(t, pgstore.DatabaseClock))
			is.NoErr(enqueueRows(ctx, claimer.store, turnframe.NewIDGenerator(), "acme", "k1", claimer.now(), turnframe.OutboxMessage{Destination: "payments"})) // one row
			claims, err := claimer.store.ClaimDue(ctx, claimer.now(), 1, "claimer", 300*time.Millisecond)
			is.NoErr(err)            // claimed
			is.Equal(len(claims), 1) // the row
			pollUntil(t, "the other host expires the claim", 20*time.Second, func() bool {
				ids, err := expirer.store.ExpireClaims(ctx, expirer.now())
				is.NoErr(err) // expire
				return len(ids) == 1
			})
			rec, err := claimer.store.GetOutbox(ctx, claims[0].ID)
			is.NoErr(err)                                                          // read back
			is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown)                   // expired: its send may have started
			is.True(!rec.UpdatedAt.Before(claims[0].LeaseUntil.Add(-time.Second))) // not before its lease ended, on the claimer's clock (give or take the clocks' drift)
		})
	}
}

// Dispatchers on hosts whose clocks are an hour apart, each running Run on
// its own store, send every row of the database once, release nothing
// early and leave every row Completed.
func TestDispatchersOnSkewedClocksSendEveryRowOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	ahead, behind := skewedHosts(t, pgstore.DatabaseClock)
	ids := turnframe.NewIDGenerator()
	const rows = 60
	for i := range rows {
		h := []host{ahead, behind}[i%2]
		is.NoErr(enqueueRows(ctx, h.store, ids, "acme", turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), h.now(), turnframe.OutboxMessage{Destination: "payments"})) // enqueue
	}

	var mu sync.Mutex
	sent := make(map[turnframe.OutboxID]int)
	first := make(chan struct{}, rows)
	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		mu.Lock()
		sent[e.ID]++
		n := sent[e.ID]
		mu.Unlock()
		if n == 1 {
			first <- struct{}{}
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	runCtx, stop := context.WithCancel(ctx)
	var runs sync.WaitGroup
	errs := make(chan error, 2)
	for _, h := range []host{ahead, behind} {
		cfg := turnframe.DefaultDispatchConfig(fmt.Sprintf("worker-%p", h.store))
		cfg.BatchSize, cfg.Concurrency, cfg.PollInterval = 4, 4, 20*time.Millisecond // small batches, frequent releases
		d := turnframe.NewDispatcher(h.store, sender, cfg, turnframe.WithClock(h.clock))
		runs.Go(func() { errs <- d.Run(runCtx) })
	}
	deadline := time.After(time.Minute)
	for range rows {
		select {
		case <-first:
		case <-deadline:
			stop()
			runs.Wait()
			t.Fatal("not every row was sent within a minute")
		}
	}
	stop()
	runs.Wait()
	is.NoErr(<-errs) // a Run
	is.NoErr(<-errs) // the other
	for _, n := range sent {
		is.Equal(n, 1) // each row sent once
	}
	done, err := ahead.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxCompleted, Limit: 1000})
	is.NoErr(err)             // list
	is.Equal(len(done), rows) // every row Completed: none expired to OutcomeUnknown
}

// Runtimes on hosts whose clocks are an hour apart take a journal entry only
// once the attempt holding it lost its lease on the database's clock: while
// it runs on the host behind, the host ahead reports it in flight; once an
// abandoned attempt's lease of 300 ms ended, the host ahead runs it.
func TestSkewedRuntimesTakeAnEntryOnlyOnceItsLeaseEnded(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	ahead, behind := skewedHosts(t, pgstore.DatabaseClock)
	short := []turnframe.Option{turnframe.WithCommandTimeout(100 * time.Millisecond), turnframe.WithLeaseMargin(200 * time.Millisecond)}
	runtime := func(h host, opts ...turnframe.Option) *turnframe.Runtime {
		return turnframe.New(h.store, append([]turnframe.Option{turnframe.WithClock(h.clock)}, opts...)...)
	}
	plan := func(rt *turnframe.Runtime, key turnframe.IdempotencyKey) turnframe.TurnID {
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book")
		is.NoErr(err) // receive
		_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: key, Case: "seat/1A", Name: "book"}}})
		is.NoErr(err) // plan
		return turn
	}
	ran := turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome { return turnframe.Commit(nil) })

	t.Run("InFlightWhileItsLeaseRuns", func(t *testing.T) {
		is := is.New(t)
		slow := runtime(behind, turnframe.WithCommandTimeout(time.Minute))
		turn := plan(slow, "k1")
		started, finish := make(chan struct{}), make(chan struct{})
		held := make(chan error, 1)
		go func() {
			_, err := slow.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
				close(started)
				<-finish
				return turnframe.Commit(nil)
			}))
			held <- err
		}()
		<-started
		report, err := runtime(ahead, short...).Execute(ctx, "acme", turn, ran)
		close(finish)
		is.NoErr(err)                                              // the host ahead's Execute
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // the entry runs elsewhere
		is.True(!report.Results[0].Ran)                            // and was not run here
		is.NoErr(<-held)                                           // the host behind committed it
	})

	// A command whose Remote forbids a blind rerun: a host an hour ahead
	// must not declare the holder's attempt dead while its lease runs on
	// the database's clock, nor run the turn's next command ahead of it.
	// (On the callers' clocks it would: the control of this was running
	// this subtest with CallerClock, which fails on the entry's status.)
	t.Run("NotDeclaredDeadWhileItsLeaseRuns", func(t *testing.T) {
		is := is.New(t)
		neither := turnframe.WithCommand("book", turnframe.Remote{})
		slow := runtime(behind, turnframe.WithCommandTimeout(time.Minute), neither)
		turn, err := slow.Receive(ctx, "acme", slow.NewConversationID(), "book, then mail")
		is.NoErr(err) // receive
		_, err = slow.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{
			{Key: "k3", Case: "seat/3A", Name: "book"}, {Key: "k3-mail", Case: "mail/3", Name: "mail"}}})
		is.NoErr(err) // plan
		started, finish := make(chan struct{}), make(chan struct{})
		held := make(chan error, 1)
		go func() {
			_, err := slow.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
				if c.Command.Key == "k3" {
					close(started)
					<-finish
				}
				return turnframe.Commit(nil)
			}))
			held <- err
		}()
		<-started
		var ranAhead []turnframe.IdempotencyKey
		report, err := runtime(ahead, append(short, neither)...).Execute(ctx, "acme", turn,
			turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
				ranAhead = append(ranAhead, c.Command.Key)
				return turnframe.Commit(nil)
			}))
		e, rerr := ahead.store.ByKey(ctx, "acme", "k3")
		close(finish)
		is.NoErr(err)                                              // the host ahead's Execute
		is.NoErr(rerr)                                             // read back
		is.Equal(e.Status, turnframe.JournalExecuting)             // not declared unknown
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // in flight on the database's clock
		is.Equal(report.Results[1].Kind, turnframe.ResultPending)  // the next command waits
		is.Equal(len(ranAhead), 0)                                 // nothing ran on the host ahead
		is.NoErr(<-held)                                           // the host behind ran both
	})

	t.Run("TakenOverOnceAnAbandonedLeaseEnded", func(t *testing.T) {
		is := is.New(t)
		dying := runtime(behind, short...)
		turn := plan(dying, "k2")
		cut, cancel := context.WithCancel(ctx)
		release := make(chan struct{})
		_, err := dying.Execute(cut, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			cancel() // the host behind stops, its attempt Executing under its lease
			<-release
			return turnframe.Unknown("")
		}))
		close(release)
		is.True(errors.Is(err, context.Canceled)) // the attempt died
		taker := runtime(ahead, short...)
		pollUntil(t, "the host ahead runs the entry", 20*time.Second, func() bool {
			report, err := taker.Execute(ctx, "acme", turn, ran)
			is.NoErr(err) // execute
			return report.Results[0].Ran
		})
		e, err := ahead.store.ByKey(ctx, "acme", "k2")
		is.NoErr(err)                                  // read back
		is.Equal(e.Status, turnframe.JournalCommitted) // run once more, by the host ahead
		is.Equal(e.Attempts, 2)                        // the dead attempt and this one
	})

	// The mirror of NotDeclaredDeadWhileItsLeaseRuns: the holder of a
	// command whose Remote forbids a blind rerun dies on the host an hour
	// ahead. The host behind, whose clock says the lease has an hour to
	// run, must neither take it over (Execute sends no take for such a
	// command) nor wait that hour: the lease is read in its frame, so it
	// declares the attempt unknown once the lease ended on the database's
	// clock, and its Recover escalates it. (On the callers' clocks the
	// host behind waits the hour: running this subtest with CallerClock
	// fails on the deadline.)
	t.Run("ANoRerunAttemptIsDeclaredUnknownOnceItsLeaseEnded", func(t *testing.T) {
		is := is.New(t)
		neither := turnframe.WithCommand("book", turnframe.Remote{})
		dying := runtime(ahead, append(short, neither)...)
		turn := plan(dying, "k4")
		cut, cancel := context.WithCancel(ctx)
		release := make(chan struct{})
		_, err := dying.Execute(cut, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			cancel() // the host ahead stops, its attempt Executing under its lease
			<-release
			return turnframe.Unknown("")
		}))
		close(release)
		is.True(errors.Is(err, context.Canceled)) // the attempt died
		ranBehind := 0
		taker := runtime(behind, append(short, neither)...)
		pollUntil(t, "the host behind declares the attempt unknown", 20*time.Second, func() bool {
			report, err := taker.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
				ranBehind++
				return turnframe.Commit(nil)
			}))
			is.NoErr(err) // execute
			return report.Results[0].Kind != turnframe.ResultInFlight
		})
		is.Equal(ranBehind, 0) // never run again
		e, err := behind.store.ByKey(ctx, "acme", "k4")
		is.NoErr(err)                                       // read back
		is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // for the policy
		is.Equal(e.Attempts, 1)                             // the dead attempt alone

		_, err = turnframe.NewRecovery(behind.store, turnframe.WithClock(behind.clock), neither).
			Recover(ctx, turnframe.RecoveryScope{Account: "acme"}, nopRecoveryHandler{})
		is.NoErr(err) // recover
		e, err = behind.store.ByKey(ctx, "acme", "k4")
		is.NoErr(err)                                          // read back
		is.Equal(e.Status, turnframe.JournalNeedsIntervention) // a person decides
	})
}
