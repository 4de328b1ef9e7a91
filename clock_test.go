package turnframe_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// One clock (issue 14 item 7): WithClock serves the Runtime, the
// Dispatcher and Recovery alike; every time they read without an explicit
// now argument is the clock's. Each test moves a stepClock by hand and
// checks that the time it shows is what gets stamped.

var clockT0 = time.Date(2031, 7, 1, 9, 0, 0, 0, time.UTC) // far from dispNow, so a stamp from the wrong clock shows

func TestWithClockStampsEveryWriteOfTheRuntime(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newStepClock(clockT0)
		rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(time.Minute), turnframe.WithLeaseMargin(time.Minute))
		at := func(s int) time.Time { return clockT0.Add(time.Duration(s) * time.Second) }

		turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book it")
		is.NoErr(err) // receive
		clock.set(at(1))
		_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-book", "flight/7", "book")}})
		is.NoErr(err) // plan
		clock.set(at(2))
		var leased time.Time
		_, err = rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
			leased = rtEntry(t, store, call.Command.Key).LeaseUntil
			clock.set(at(3)) // the handler takes a second
			return rtScript(ctx, call, 1)
		}))
		is.NoErr(err) // execute
		clock.set(at(4))
		is.NoErr(rt.Deliver(ctx, rtAccount, turn, "booked")) // deliver

		stored, err := store.LoadTurn(ctx, rtAccount, turn)
		is.NoErr(err)
		is.True(stored.ReceivedAt.Equal(at(0))) // received at the clock's time
		is.True(stored.UpdatedAt.Equal(at(4)))  // delivered at the clock's time
		e := rtEntry(t, store, "k-book")
		is.True(e.AdmittedAt.Equal(at(1)))                // admitted at the clock's time
		is.True(leased.Equal(at(2).Add(2 * time.Minute))) // taken at the clock's time, for the command timeout and the margin
		is.True(e.UpdatedAt.Equal(at(3)))                 // settled at the clock's time
		row, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Account: rtAccount, Limit: 10})
		is.NoErr(err)
		is.True(row[0].CreatedAt.Equal(at(3))) // enqueued with the settlement
	})
}

// clockExtensions is a store that hands the time of every lease extension
// to a channel.
type clockExtensions struct {
	turnframe.Store
	at chan time.Time
}

func (s clockExtensions) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	select {
	case s.at <- now:
	default: // the test has seen what it waits for
	}
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

func TestWithClockTimesTheDispatchersSweep(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k-pay", dispMessages(1, "payments", "")...)[0]
		clock := newStepClock(clockT0)
		started, proceed := make(chan struct{}), make(chan struct{})
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			close(started)
			<-proceed
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.SendTimeout, cfg.LeaseMargin = time.Hour, 2*time.Millisecond
		spy := clockExtensions{Store: store, at: make(chan time.Time, 1)}
		d := turnframe.NewDispatcher(spy, sender, cfg, turnframe.WithClock(clock.read))
		done := make(chan error, 1)
		go func() {
			_, err := d.RunOnce(ctx, dispNow) // the claim's time is given; the sweep's clock runs from it
			done <- err
		}()

		<-started
		clock.set(clockT0.Add(5 * time.Minute)) // five minutes into the send, as the clock tells it
		want := dispNow.Add(5 * time.Minute)
		safety := time.After(10 * time.Second) // a safety net for an extension never stamped so: not a wait
		var got time.Time
		for !got.Equal(want) {
			select {
			case got = <-spy.at:
			case <-safety:
				close(proceed)
				t.Fatalf("no lease extension stamped at %v, the claim's time plus the clock's five minutes", want)
			}
		}
		close(proceed)
		is.NoErr(<-done)                                                      // run once
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxCompleted) // settled
	})
}

func TestWithClockStampsRecoverysWrites(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		rt := turnframe.New(store, quiet, turnframe.WithClock(func() time.Time { return dispNow }))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err) // the charge's outcome is unknown
		row := dispEnqueue(t, store, rtAccount, "k-pay", dispMessages(1, "payments", "")...)[0]
		claims, err := store.ClaimDue(ctx, dispNow, 1, "w1", time.Minute)
		is.NoErr(err) // a dispatcher claims the row, then dies
		is.Equal(len(claims), 1)

		clock := newStepClock(clockT0)
		r := turnframe.NewRecovery(store, quiet, turnframe.WithClock(clock.read), turnframe.WithDestination("payments", turnframe.Remote{}))
		report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)                                               // recover
		is.Equal(report.Expired, []turnframe.OutboxID{row.ID})      // the claim ended by the clock's time
		is.True(dispGet(t, store, row.ID).UpdatedAt.Equal(clockT0)) // expired, and escalated, at the clock's time

		clock.set(clockT0.Add(time.Hour))
		is.NoErr(r.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"), turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:ann"}))
		is.True(rtEntry(t, store, "k-charge").UpdatedAt.Equal(clockT0.Add(time.Hour))) // settled at the clock's time
		trail := histOf(t, store, turnframe.JournalSubject(rtAccount, "k-charge"))
		is.True(trail[len(trail)-1].At.Equal(clockT0.Add(time.Hour))) // and recorded so
	})
}
