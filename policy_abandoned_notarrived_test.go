package turnframe_test

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Remote (remote.go): "NotHappened resends it, at most Resends times, then
// escalates (a command of an abandoned turn: rejects it)"; DESIGN.md,
// policies: "never arrived → sent again ... (a command of an abandoned
// turn: rejected)". Nothing will ever run a command of an abandoned turn
// again, so a lookup that finds it never arrived settles it rejected; a
// resend would be refused (ErrConflict) and leave it unknown for good.
func TestAVerifierThatFindsACommandOfAnAbandonedTurnNeverArrivedRejectsIt(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // the charge's outcome unknown
		is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
		r := turnframe.NewRecovery(store, turnframe.WithCommand("charge",
			turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened, "")}))
		report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)
		res := policyFor(t, report, turnframe.JournalSubject(rtAccount, "k-charge"))
		is.NoErr(res.Err)
		is.Equal(res.Outcome, turnframe.PolicyRejected) // not resent: nothing would run it
		e := rtEntry(t, store, "k-charge")
		is.Equal(e.Status, turnframe.JournalRejected) // settled, not left unknown
		is.Equal(e.Code, turnframe.CodeVerifiedNotHappened)
	})
}
