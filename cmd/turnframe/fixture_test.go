package main

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// fixture is a database built with the library, holding outbox rows in
// every status and turns in the states recovery tells apart.
type fixture struct {
	path string
	t0   time.Time // when the fixture's history began: an hour ago

	claimed   turnframe.OutboxID // dispatching, claimed by a worker that died at t0: its lease ended at t0 + 10m
	live      turnframe.OutboxID // dispatching, claimed at t0 by a worker whose lease runs until t0 + 3h
	completed turnframe.OutboxID
	failed    turnframe.OutboxID // http.400
	unknown   turnframe.OutboxID // outcome_unknown, order key "seat"
	held      turnframe.OutboxID // pending since t0 + 1s, held behind the unknown row of its order key
	due       turnframe.OutboxID // pending, due since t0 + a few seconds
	later     turnframe.OutboxID // pending, due in a day

	delivered        turnframe.TurnID // delivered, everything settled
	planned          turnframe.TurnID // planned, its command pending: resume_commands
	received         turnframe.TurnID // received only: restart_interpretation
	unknownDelivered turnframe.TurnID // delivered with an outcome_unknown command: reconcile_external
}

const fixtureAccount turnframe.AccountID = "acme"

// fixtureTrace is the trace context of the fixture's unknown row: the only
// row that has one.
const fixtureTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testClock is a settable clock, safe for concurrent use.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// mustFixture builds a fixture in a new file and closes it again, so the
// commands under test are the only ones holding it.
func mustFixture(t *testing.T) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	store, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open a new store: %v", err)
	}
	defer store.Close()
	return buildFixture(t, store, path)
}

// buildFixture writes the fixture with the library into store, an empty
// store of any kind that keeps the times it is given (the fixture's history
// began an hour ago), and returns it with db, the --db that opens it.
func buildFixture(t *testing.T, store turnframe.Store, db string) fixture {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	f := fixture{
		path: db,
		t0:   time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond),
	}
	clock := &testClock{t: f.t0}
	rt := turnframe.New(store, turnframe.WithClock(clock.Now))
	conv := rt.NewConversationID()

	commit := turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		msg := turnframe.OutboxMessage{Destination: call.Command.Name, Payload: []byte(`{"cents":100}`)}
		switch call.Command.Name {
		case "later":
			msg.NotBefore = f.t0.Add(24 * time.Hour)
		case "hang", "held":
			msg.OrderKey = "seat"
		}
		if call.Command.Name == "hang" {
			msg.TraceContext = fixtureTrace // the unknown row was enqueued under a trace
		}
		if call.Command.Name == "ask-remote" {
			return turnframe.Unknown("remote-ref-7")
		}
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "thing.done", Data: call.Command.Payload}}, msg)
	})
	turn := func(text string, commands ...string) turnframe.TurnID {
		t.Helper()
		id, err := rt.Receive(ctx, fixtureAccount, conv, text)
		is.NoErr(err) // receive
		if len(commands) == 0 {
			return id
		}
		var plan turnframe.Plan
		for _, c := range commands {
			plan.Commands = append(plan.Commands, turnframe.Command{
				Key: turnframe.IdempotencyKey("key-" + c), Case: "order/1", Name: c, Payload: []byte(`{"c":"` + c + `"}`),
			})
		}
		_, err = rt.Plan(ctx, fixtureAccount, id, plan)
		is.NoErr(err) // plan
		return id
	}
	execute := func(id turnframe.TurnID) []turnframe.OutboxID {
		t.Helper()
		rep, err := rt.Execute(ctx, fixtureAccount, id, commit)
		is.NoErr(err) // execute
		var rows []turnframe.OutboxID
		for _, r := range rep.Results {
			rows = append(rows, r.OutboxIDs...)
		}
		is.NoErr(rt.Deliver(ctx, fixtureAccount, id, "done")) // deliver
		return rows
	}

	// A dispatcher claims the first row at t0 under a ten-minute lease and
	// dies holding it; another claims the second under a three-hour lease,
	// and is still sending it.
	first := turn("claim it", "claim")
	f.claimed = execute(first)[0]
	claims, err := store.ClaimDue(ctx, f.t0, 1, "dead-worker", 10*time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1)
	f.live = execute(turn("hold it", "hold"))[0]
	claims, err = store.ClaimDue(ctx, f.t0, 1, "live-worker", 3*time.Hour)
	is.NoErr(err)
	is.Equal(len(claims), 1)
	is.Equal(claims[0].ID, f.live)

	clock.Set(f.t0.Add(time.Second))
	f.delivered = turn("do six things", "ok", "refuse", "hang", "held", "retry", "later")
	rows := execute(f.delivered)
	f.completed, f.failed, f.unknown, f.held, f.due, f.later = rows[0], rows[1], rows[2], rows[3], rows[4], rows[5]
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		switch e.Destination {
		case "ok":
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, RemoteRef: "ch_1"}
		case "refuse":
			return turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.400"}
		case "retry":
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.timeout"}
	})
	disp := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "fixture"})
	rep, err := disp.RunOnce(ctx, f.t0.Add(2*time.Second))
	is.NoErr(err)
	is.Equal(rep.Claimed(), 4) // ok, refuse, hang, retry: the claimed rows, the held row and the later one wait

	clock.Set(f.t0.Add(3 * time.Second))
	f.planned = turn("plan only", "pending-one")
	f.received = turn("just received")
	f.unknownDelivered = turn("ask the remote", "ask-remote")
	rep2, err := rt.Execute(ctx, fixtureAccount, f.unknownDelivered, commit)
	is.NoErr(err)
	is.Equal(rep2.Results[0].Kind, turnframe.ResultUnknown)
	is.NoErr(rt.Deliver(ctx, fixtureAccount, f.unknownDelivered, "we are verifying"))

	for id, want := range map[turnframe.OutboxID]turnframe.OutboxStatus{
		f.claimed: turnframe.OutboxDispatching, f.live: turnframe.OutboxDispatching,
		f.completed: turnframe.OutboxCompleted, f.failed: turnframe.OutboxFailed,
		f.unknown: turnframe.OutboxOutcomeUnknown, f.held: turnframe.OutboxPending,
		f.due: turnframe.OutboxPending, f.later: turnframe.OutboxPending,
	} {
		rec, err := store.GetOutbox(ctx, id)
		is.NoErr(err)
		is.Equal(rec.Status, want) // the fixture row is in the status it stands for
	}
	return f
}

// openFixture opens the fixture's file as a second process would.
func openFixture(t *testing.T, f fixture) *sqlitestore.Store {
	t.Helper()
	store, err := sqlitestore.Open(context.Background(), f.path, sqlitestore.WithExisting())
	if err != nil {
		t.Fatalf("open the fixture: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
