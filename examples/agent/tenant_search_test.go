package main

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Command keys are unique per account, not across accounts: two tenants
// whose clients both number their messages "m1" admit the same search
// key. The app's table of search results is keyed by the account and the
// key, as turnframe's journal is, so the second tenant's search commits
// its own row and reads it back. (Keyed by the command key alone, the
// second tenant's commit hit the first's row: its App write failed, and
// it never searched for as long as the first tenant's row was there.)
func TestTwoTenantsSearchUnderTheSameCommandKey(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, p, _ := startedAgent(ctx, t)
	call := script[askSearch][0]
	for _, tenant := range []turnframe.AccountID{"ana", "bob"} {
		turn, err := p.rt.Receive(ctx, tenant, p.rt.NewConversationID(), askSearch)
		is.NoErr(err) // received
		_, err = p.rt.Plan(ctx, tenant, turn, turnframe.Plan{Commands: []turnframe.Command{command(msgSearch.ID, call)}})
		is.NoErr(err) // planned
		_, err = p.rt.Execute(ctx, tenant, turn, a.mux)
		is.NoErr(err) // executed
		e, err := p.store.ByKey(ctx, tenant, commandKey(msgSearch.ID, call))
		is.NoErr(err)                                  // admitted
		is.Equal(e.Status, turnframe.JournalCommitted) // each tenant's search ran and committed
		text, err := doneText(ctx, p.store, e)
		is.NoErr(err) // and its results are read back
		is.True(text != "")
	}
	var rows int
	is.NoErr(p.store.ReadDB().QueryRowContext(ctx, `SELECT count(*) FROM searches`).Scan(&rows))
	is.Equal(rows, 2) // one row of results per tenant
}
