package main

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// Workload runs one turn over a fresh in-memory store with obs installed:
// a "book" command that commits and enqueues one message to "payments" and
// one to "email", and a "refuse" command that is rejected; then one
// dispatcher sweep, in which payments completes and email asks to be tried
// again later.
func Workload(ctx context.Context, obs turnframe.Observer) error {
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithObserver(obs))
	const account = turnframe.AccountID("demo")
	turn, err := rt.Receive(ctx, account, rt.NewConversationID(), "book the flight")
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	plan := turnframe.Plan{Commands: []turnframe.Command{
		{Key: "k-book", Case: "flight/7", Name: "book"},
		{Key: "k-refuse", Case: "flight/8", Name: "refuse"},
	}}
	if _, err := rt.Plan(ctx, account, turn, plan); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if _, err := rt.Execute(ctx, account, turn, turnframe.HandlerFunc(handle)); err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	d := turnframe.NewDispatcher(store, turnframe.SenderFunc(send), turnframe.DefaultDispatchConfig("demo-worker"), turnframe.WithObserver(obs))
	if _, err := d.RunOnce(ctx, time.Now()); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	return nil
}

func handle(_ context.Context, call turnframe.Call) turnframe.Outcome {
	if call.Command.Name == "refuse" {
		return turnframe.Reject("sold_out")
	}
	return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "booked"}},
		turnframe.OutboxMessage{Destination: "payments"}, turnframe.OutboxMessage{Destination: "email"})
}

func send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	if e.Destination == "email" {
		return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "smtp.421"}
	}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}
