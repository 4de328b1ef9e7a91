package main

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// mailKey, the Idempotency-Key send_email gives the mail remote and the key
// its Verifier looks an unknown email up by, is injective across tenants:
// tenant "ana/m3"'s command "c1" and tenant "ana"'s command "m3/c1" are
// two keys, so one tenant's unknown email is never verified from the
// other's.
func TestMailKeyDoesNotCollideAcrossTenants(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	r := newRemotes()
	defer r.Close()
	r.hangs = 0
	// Tenant "ana" sends her email, under command m3/c1.
	out := sendEmail(ctx, r, turnframe.Call{Account: "ana",
		Command: turnframe.Command{Key: "m3/c1", Case: "mailbox/ana@example.com", Name: toolEmail, Payload: []byte(`{}`)}})
	is.Equal(out.Kind(), turnframe.OutcomeCommit) // sent
	// Tenant "ana/m3"'s email under command c1 never left: its outcome is
	// unknown, and the policy asks the example's Verifier.
	v := r.verifier(remoteMail, func(u turnframe.Uncertain) string { return mailKey(u.Subject.Account, u.Key) })
	u := turnframe.Uncertain{Subject: turnframe.JournalSubject("ana/m3", "c1"), Key: "c1", Name: toolEmail}
	got := v.Verify(ctx, u)
	is.Equal(got.Found, turnframe.FoundNotHappened)             // tenant ana/m3 sent nothing
	is.True(mailKey("ana/m3", "c1") != mailKey("ana", "m3/c1")) // two tenants' keys are two keys
}
