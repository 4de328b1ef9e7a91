package turnframe_test

import (
	"context"
	"fmt"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// A command whose handler only changes the application's own state (here:
// a note on a case, one event) is declared local: Execute runs it without
// first marking it Executing, and writes its outcome in one transaction.
// A command that calls out — an email, a payment — must not be declared
// local: a crash mid-call would run it again blindly.
func ExampleWithLocalCommand() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithLocalCommand("note"))
	const account turnframe.AccountID = "acme"
	note := turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "noted", Data: call.Command.Payload}})
	})

	turn, _ := rt.Receive(ctx, account, rt.NewConversationID(), "Remember that I prefer a window seat.")
	_, _ = rt.Plan(ctx, account, turn, turnframe.Plan{Commands: []turnframe.Command{
		{Key: "acme-note-1", Case: "profile/ana", Name: "note", Payload: []byte("window seat")},
	}})
	report, err := rt.Execute(ctx, account, turn, note)
	if err != nil {
		fmt.Println("execute:", err)
		return
	}
	entry, _ := store.ByKey(ctx, account, "acme-note-1")
	fmt.Println(report.Results[0].Kind, report.Phase)
	fmt.Println("attempts:", entry.Attempts)
	for _, h := range mustHistory(ctx, store, turnframe.JournalSubject(account, "acme-note-1")) {
		fmt.Printf("%q → %s\n", h.From, h.To)
	}
	// Output:
	// committed committed
	// attempts: 1
	// "" → pending
	// "pending" → committed
}

// mustHistory returns subject's audit trail, or nothing on an error.
func mustHistory(ctx context.Context, store turnframe.Store, subject turnframe.Subject) []turnframe.HistoryRecord {
	h, _ := store.History(ctx, subject, 0, turnframe.MaxLimit)
	return h
}
