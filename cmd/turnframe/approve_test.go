package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// approvalFixture writes a database whose account acme planned two
// commands that await approval, pay-1 and pay-2, and one that does not,
// book-1; it returns the file and the turn.
func approvalFixture(t *testing.T) (string, turnframe.TurnID) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "approvals.db")
	store, err := sqlitestore.Open(ctx, path)
	is.NoErr(err) // open a new store
	defer store.Close()
	rt := turnframe.New(store)
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay both invoices and book")
	is.NoErr(err)
	cmd := func(key, name string, approval bool) turnframe.Command {
		return turnframe.Command{Key: turnframe.IdempotencyKey(key), Case: "invoice/1", Name: name, NeedsApproval: approval}
	}
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{
		cmd("pay-1", "pay", true), cmd("pay-2", "pay", true), cmd("book-1", "book", false)}})
	is.NoErr(err) // plan
	return path, turn
}

func TestApprovals(t *testing.T) {
	path, turn := approvalFixture(t)
	t.Run("ListsWhatAwaitsApproval", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "approvals", "--db", path)
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "2 journal entries await approval"))
		is.True(strings.Contains(out, "acme     pay-1  pay      invoice/1  "+turn.String())) // listed with its turn
		is.True(strings.Contains(out, "pay-2"))
		is.True(!strings.Contains(out, "book-1")) // a command that needs no approval is not listed
	})
	t.Run("StatusCountsAndListsThem", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "awaiting approval:   journal entries 2"))
		is.True(strings.Contains(out, "commands awaiting approval"))
		code, out, _ = cli(t, "status", "--db", path, "--json")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.AwaitingApprovalJournal, 2)
		is.Equal(len(st.AwaitingApproval), 2)
		is.Equal(st.AwaitingApproval[0].Key, "pay-1")
		is.True(st.AwaitingApproval[0].NeedsApproval)
	})
	t.Run("ApproveMovesItToPending", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "approve", "--db", path, "--account", "acme", "pay-1", "--actor", "operator:alice", "--note", "checked")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "approved journal entry pay-1 (account acme, command pay, turn "+turn.String()+"): awaiting_approval → pending by operator:alice (code turnframe.approval.approved)"))
		code, out, _ = cli(t, "history", "--db", path, "--account", "acme", "pay-1")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "operator:alice")) // the audit trail names the approver
		is.True(strings.Contains(out, "checked"))        // and the note
	})
	t.Run("DenyRejectsIt", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "deny", "--db", path, "--account", "acme", "pay-2")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "denied journal entry pay-2 (account acme, command pay, turn "+turn.String()+"): awaiting_approval → rejected by operator (code turnframe.approval.denied); it never runs"))
		code, out, _ = cli(t, "approvals", "--db", path, "--json")
		is.Equal(code, exitOK)
		var got approvalsJSON
		is.NoErr(json.Unmarshal([]byte(out), &got))
		is.Equal(got.Count, 0) // nothing awaits any more
		is.Equal(len(got.Entries), 0)
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"ApprovingTwiceIsRefused", []string{"approve", "--account", "acme", "pay-1"}, "refused, nothing changed", exitUsage},
		{"DenyingAnApprovedOneIsRefused", []string{"deny", "--account", "acme", "pay-1"}, "not awaiting approval", exitUsage},
		{"ACommandThatNeedsNoApproval", []string{"approve", "--account", "acme", "book-1"}, "not awaiting approval", exitUsage},
		{"NoSuchKey", []string{"approve", "--account", "acme", "pay-9"}, "has no journal entry under the key pay-9", exitUsage},
		{"AnotherAccount", []string{"deny", "--account", "globex", "pay-1"}, "account globex has no journal entry", exitUsage},
		{"NoAccount", []string{"approve", "pay-1"}, "--account is required", exitUsage},
		{"NoKey", []string{"approve", "--account", "acme"}, "give one KEY", exitUsage},
		{"ThePolicyMayNotApprove", []string{"approve", "--account", "acme", "pay-1", "--actor", "policy"}, "may not approve or deny", exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			code, out, stderr := cli(t, append(tc.args, "--db", path)...)
			is.Equal(code, tc.code)
			is.Equal(out, "")
			is.True(strings.Contains(stderr, tc.want)) // says why
		})
	}
}
