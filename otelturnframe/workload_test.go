package otelturnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// shop is the handler of the tests' workload: "order" commits one event
// and one outbox message to each destination its payload names, "refuse"
// is rejected.
func shop(_ context.Context, call turnframe.Call) turnframe.Outcome {
	c := call.Command
	if c.Name == "refuse" {
		return turnframe.Reject("sold_out")
	}
	var msgs []turnframe.OutboxMessage
	for _, dest := range []string{"ok", "flaky", "refused", "slow"} {
		if string(c.Payload) == dest || string(c.Payload) == "all" {
			msgs = append(msgs, turnframe.OutboxMessage{Destination: dest, Payload: []byte(dest)})
		}
	}
	return turnframe.Commit([]turnframe.Event{{Case: c.Case, Type: "ordered"}}, msgs...)
}

// remote is the sender of the tests' workload, by destination: "ok"
// completes, "flaky" is retryable, "refused" is permanent, and "slow"
// answers only once its context ended: its send times out.
func remote(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	switch e.Destination {
	case "ok":
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	case "flaky":
		return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}
	case "refused":
		return turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.400"}
	}
	<-ctx.Done()
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// runWorkload runs one turn over a fresh memstore with obs installed: an
// "order" command enqueueing a row to each destination in dests
// ("all" for the four) and a "refuse" command; then one dispatcher sweep.
// When lateAnswer is not nil, it waits for a receive from it before it
// closes the store: the slow send's late answer is recorded on the send's
// own goroutine after the sweep returned, and a store closed first would
// refuse it (the outcome "unrecorded", a race the test must not lose).
func runWorkload(ctx context.Context, obs turnframe.Observer, dests string, lateAnswer <-chan struct{}) (err error) {
	store := memstore.New()
	defer store.Close()
	defer func() {
		if err != nil || lateAnswer == nil {
			return
		}
		select {
		case <-lateAnswer: // the slow send's answer, after its deadline
		case <-time.After(10 * time.Second): // a safety net, not a wait
			err = fmt.Errorf("the slow send's late answer was never observed")
		}
	}()
	rt := turnframe.New(store, turnframe.WithObserver(obs))
	const account = turnframe.AccountID("acme")
	turn, err := rt.Receive(ctx, account, rt.NewConversationID(), "order it")
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	plan := turnframe.Plan{Commands: []turnframe.Command{
		{Key: "k-order", Case: "order/1", Name: "order", Payload: []byte(dests)},
		{Key: "k-refuse", Case: "order/2", Name: "refuse"},
	}}
	if _, err := rt.Plan(ctx, account, turn, plan); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if _, err := rt.Execute(ctx, account, turn, turnframe.HandlerFunc(shop)); err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	cfg := turnframe.DefaultDispatchConfig("worker-1")
	// The slow destination's send times out; the others answer at once, and
	// must beat the same deadline: at 20 ms a loaded machine sometimes
	// spent that on scheduling alone, and "ok" went unknown.
	cfg.SendTimeout = 500 * time.Millisecond
	d := turnframe.NewDispatcher(store, turnframe.SenderFunc(remote), cfg, turnframe.WithObserver(obs))
	if _, err := d.RunOnce(ctx, time.Now()); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	return nil
}
