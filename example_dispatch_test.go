package turnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// The application owns the dispatch loop: turnframe starts nothing. Each
// sweep claims the rows that are due, sends them and settles them before
// RunOnce returns. In production the loop runs on a time.Ticker until the
// application shuts down, with now = time.Now(); here the clock is fixed and
// steps one second per sweep, so the output never changes.
func ExampleDispatcher() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// A turn's command committed, asking for two effects: a charge and a
	// receipt. Its outbox rows were written in the same transaction.
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	if _, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "pay order 7"},
		Admit:  []turnframe.Command{{Key: "order-7", Case: "order/7", Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalExecuting, Attempt: attempt}},
	}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: "order-7", To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: []turnframe.OutboxMessage{
			{Destination: "payments", Payload: []byte(`{"amount":100}`)},
			{Destination: "email", Payload: []byte("receipt")},
		},
	}); err != nil {
		fmt.Println(err)
		return
	}

	// The sender: an HTTPSender, or the application's own client. This one
	// finds the mail server busy once.
	mailBusy := true
	sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		fmt.Printf("send %s %s Idempotency-Key=%s\n", e.Destination, e.Payload, e.RemoteKey())
		if e.Destination == "email" && mailBusy {
			mailBusy = false
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "smtp.421"}
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	dispatcher := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("worker-1"))

	for sweep := range 3 {
		report, err := dispatcher.RunOnce(ctx, now)
		switch {
		case err != nil:
			fmt.Println("the outbox could not be read:", err)
		case report.IsEmpty():
			fmt.Printf("sweep %d: nothing due\n", sweep)
		default:
			fmt.Printf("sweep %d: %d completed, %d retried, %d failed, %d unknown\n",
				sweep, len(report.Completed), len(report.Retried), len(report.Failed), len(report.Unknown))
		}
		now = now.Add(time.Second)
	}

	// Output:
	// send payments {"amount":100} Idempotency-Key=4.acme.order-7/1
	// send email receipt Idempotency-Key=4.acme.order-7/2
	// sweep 0: 1 completed, 1 retried, 0 failed, 0 unknown
	// send email receipt Idempotency-Key=4.acme.order-7/2
	// sweep 1: 1 completed, 0 retried, 0 failed, 0 unknown
	// sweep 2: nothing due
}
