package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// A command awaiting approval survives a restart: the process that planned
// it closes the file, the next one finds it awaiting, lists its delivered
// turn as unfinished, approves it and runs it.
func TestApprovalSurvivesReopen(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "approval.db")
	first, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	rt := turnframe.New(first)
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay the invoice")
	is.NoErr(err)
	pay := turnframe.Command{Key: "pay-1", Case: "invoice/1", Name: "pay", NeedsApproval: true}
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{pay}})
	is.NoErr(err)
	is.NoErr(rt.Deliver(ctx, "acme", turn, "the payment waits for your approval"))
	is.NoErr(first.Close()) // the process ends

	second := mustOpenPath(t, path)
	e, err := second.ByKey(ctx, "acme", "pay-1")
	is.NoErr(err)
	is.Equal(e.Status, turnframe.JournalAwaitingApproval) // still awaiting
	is.True(e.NeedsApproval)
	unfinished, err := second.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
	is.NoErr(err)
	is.Equal(len(unfinished), 1)
	is.Equal(unfinished[0].Turn, turn) // its delivered turn waits

	rt = turnframe.New(second)
	_, err = rt.Approve(ctx, "acme", "pay-1", "operator:alice", "checked")
	is.NoErr(err)
	calls := 0
	report, err := rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		calls++
		return turnframe.Commit(nil)
	}))
	is.NoErr(err)
	is.Equal(calls, 1) // run once, after the approval
	is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)
	h, err := second.History(ctx, turnframe.JournalSubject("acme", "pay-1"), 0, 10)
	is.NoErr(err)
	is.Equal(len(h), 4) // admitted, approved, taken, committed
	is.Equal(h[1].Actor, turnframe.Actor("operator:alice"))
	is.Equal(h[1].Code, turnframe.CodeApproved)
}
