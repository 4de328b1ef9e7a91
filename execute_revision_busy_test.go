package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// rtBusyRevision fails the first read of a case's revision, as a read on a
// busy store does.
type rtBusyRevision struct {
	turnframe.Store
	failed bool
}

func (s *rtBusyRevision) CaseRevision(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if !s.failed {
		s.failed = true
		return 0, fmt.Errorf("read revision: %w", turnframe.ErrBusy)
	}
	return s.Store.CaseRevision(ctx, a, c)
}

// A busy read of the case's revision, which the handler is called with,
// stops Execute before the call. It must not leave the entry held by an
// attempt whose handler never ran: every Execute until its lease ended
// would report it in flight ("another Execute runs it now") while nothing
// does, and once it ended, a command whose Remote forbids a blind rerun
// would be declared unknown — "may have acted", for the policy, and for a
// remote that can do neither a person — although it never ran. The entry
// stays Pending, and the next Execute runs it, at once or later.
func TestABusyRevisionReadNeverLeavesAnEntryHeldByAnAttemptThatNeverRan(t *testing.T) {
	for _, later := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("next Execute %v later", later), func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
				opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(time.Minute),
					turnframe.WithCommand("book", turnframe.Remote{})} // can do neither
				turn := rtPlanned(t, turnframe.New(store, opts...), rtAccount, rtCmd("k-book", "flight/7", "book"))
				h := rtNewHandler(rtScript)

				report, err := turnframe.New(&rtBusyRevision{Store: store}, opts...).Execute(ctx, rtAccount, turn, h)
				is.True(errors.Is(err, turnframe.ErrBusy))                                // the read failed: try again
				is.Equal(h.callsOf("k-book"), 0)                                          // before any call
				is.True(!report.Results[0].Ran)                                           // and says so
				is.True(rtEntry(t, store, "k-book").Status != turnframe.JournalExecuting) // no attempt holds it

				clock.set(clock.read().Add(later))
				report, err = turnframe.New(store, opts...).Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)              // run by the next Execute
				is.Equal(h.callsOf("k-book"), 1)                                         // once
				is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // never declared unknown
			})
		})
	}
}
