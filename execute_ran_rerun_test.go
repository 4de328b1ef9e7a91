package turnframe_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// busyThirdRevision is a store whose third CaseRevision read is refused as
// busy: the read of a re-run after a commit conflict (the first run's read,
// rerunnable's read again, then the re-run's).
type busyThirdRevision struct {
	turnframe.Store
	reads atomic.Int32
}

func (s *busyThirdRevision) CaseRevision(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if s.reads.Add(1) == 3 {
		return 0, fmt.Errorf("case revision: %w", turnframe.ErrBusy)
	}
	return s.Store.CaseRevision(ctx, a, c)
}

// CommandResult.Ran "reports whether this Execute called the handler for
// it" (handler.go). The handler ran once, its commit met a moved case, and
// the re-run's read of the case revision failed: the handler had been
// called (it may have acted), and Ran must say so; each pass used to
// forget the one before.
func TestExecuteReportsRanWhenTheReRunAfterAConflictFailsBeforeItsCall(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) { ranAfterConflict(t, local) })
	}
}

func ranAfterConflict(t *testing.T, local bool) {
	is := is.New(t)
	ctx := context.Background()
	mem := memstore.New()
	defer mem.Close()
	store := &busyThirdRevision{Store: mem}
	var opts []turnframe.Option
	if local {
		opts = append(opts, turnframe.WithLocalCommand("hold"))
	}
	a, b := turnframe.New(store, opts...), turnframe.New(mem)
	turnA := rtPlanned(t, a, rtAccount, rtCmd("a-hold", "flight/7", "hold"))
	turnB := rtPlanned(t, b, rtAccount, rtCmd("b-bump", "flight/7", "bump"))
	hold := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
		if n == 1 { // the case moves under the first run
			if _, err := b.Execute(ctx, rtAccount, turnB, rtNewHandler(rtScript)); err != nil {
				return turnframe.Reject("b: " + err.Error())
			}
		}
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "held"}})
	})

	report, err := a.Execute(ctx, rtAccount, turnA, hold)
	is.True(err != nil) // the re-run's read was refused
	t.Logf("err: %v", err)
	is.Equal(hold.callsOf("a-hold"), 1) // the handler was called once
	is.Equal(len(report.Results), 1)
	is.True(report.Results[0].Ran) // and this Execute says so
}
