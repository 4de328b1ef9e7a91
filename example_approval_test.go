package turnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// A payment an agent proposed waits for a person: planned with
// NeedsApproval, Execute skips it and the answer says it waits; once
// approved, the next Execute of the turn runs it, after the answer went out.
func ExampleRuntime_Approve() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }))
	const account turnframe.AccountID = "acme"
	pay := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		fmt.Println("paying invoice 7")
		return turnframe.Commit(nil)
	})

	turn, _ := rt.Receive(ctx, account, rt.NewConversationID(), "Pay invoice 7.")
	_, _ = rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{
		{Key: "acme-pay-7", Case: "invoice/7", Name: "pay", NeedsApproval: true},
	}})
	report, _ := rt.Execute(ctx, account, turn, pay)
	fmt.Println(report.Results[0].Kind)
	_ = rt.Deliver(ctx, account, turn, "The payment waits for your approval.")

	entry, err := rt.Approve(ctx, account, "acme-pay-7", "operator:alice", "invoice checked")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(entry.Status, entry.Code)
	report, _ = rt.Execute(ctx, account, entry.Turn, pay)
	fmt.Println(report.Results[0].Kind, report.Phase)
	// Output:
	// awaiting_approval
	// pending turnframe.approval.approved
	// paying invoice 7
	// committed delivered
}
