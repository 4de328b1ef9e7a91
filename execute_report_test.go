package turnframe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Runtime.Execute: "Execute stops at the first error and returns it with the
// report so far: the failing entry and every pending entry after it are
// reported ResultPending (an entry after it awaiting approval, or settled,
// is reported as such)."
func TestExecuteReportsTheEntriesAfterAFailureAsTheyStand(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		later := rtCmd("k-later", "card/2", "pay")
		later.NeedsApproval = true
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-first", "card/1", "book"), later)
		appErr := errors.New("the app's table refused it")
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Commit(nil).With(func(context.Context, turnframe.Tx) error { return appErr })
		})
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(errors.Is(err, turnframe.ErrAppWrite)) // the first entry failed
		is.Equal(len(report.Results), 2)
		is.Equal(report.Results[0].Kind, turnframe.ResultPending)          // the failing entry
		is.Equal(report.Results[1].Kind, turnframe.ResultAwaitingApproval) // not pending: it waits for a person
	})
}
