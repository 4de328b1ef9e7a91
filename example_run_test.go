package turnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// Run is the dispatch loop the library offers: it blocks until its context
// ends, and a commit that enqueues in this process wakes it at once. Here
// the application commits a command with one outbox row after Run started,
// waits for the send, and shuts Run down; Run returns once the send is
// settled, with nothing left running.
func ExampleDispatcher_Run() {
	store := memstore.New()
	defer store.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	sent := make(chan struct{})
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		fmt.Printf("send %s %s\n", e.Destination, e.Payload)
		close(sent)
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	dispatcher := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("worker-1"), turnframe.WithClock(clock))
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	stopped := make(chan error, 1)
	go func() { stopped <- dispatcher.Run(ctx) }()

	// A command commits with one outbox row, as Runtime.Execute does.
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	if _, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "pay order 7"},
		Admit:  []turnframe.Command{{Key: "order-7", Case: "order/7", Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	}); err != nil {
		fmt.Println(err)
		return
	}
	applied, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{{Destination: "payments", Payload: []byte(`{"amount":100}`)}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	<-sent     // Run was woken by the commit
	shutdown() // the application stops
	fmt.Println("run returned:", <-stopped)
	row, err := store.GetOutbox(context.Background(), applied.Outbox[0].ID)
	fmt.Println(row.Status, err)

	// Output:
	// send payments {"amount":100}
	// run returned: <nil>
	// completed <nil>
}
