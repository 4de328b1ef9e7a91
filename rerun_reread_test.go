package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// rtBusyRereads fails every read of an entry (ByKey) or of a case's
// revision (CaseRevision), as named by reads, once armed: a store gone busy
// after a handler's commit was refused.
type rtBusyRereads struct {
	turnframe.Store
	reads string // "entry" or "revision"
	armed atomic.Bool
}

func (s *rtBusyRereads) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.armed.Load() && s.reads == "entry" {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}

func (s *rtBusyRereads) CaseRevision(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if s.armed.Load() && s.reads == "revision" {
		return 0, fmt.Errorf("read revision: %w", turnframe.ErrBusy)
	}
	return s.Store.CaseRevision(ctx, a, c)
}

// A commit refused because its case moved under the handler is re-run
// after two reads: the entry (still this attempt's?) and the case's
// revision (did it move?). When either read fails, nothing is known but the
// failed read: ErrConflict would say the case kept moving, the attempt was
// superseded or the command adopted, and a caller that tries again on
// ErrBusy would give the turn up. Execute returns the read's error; tried
// again, the entry is still held by the attempt whose commit was refused.
func TestACommitConflictWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	for _, reads := range []string{"entry", "revision"} {
		t.Run(reads, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				busy := &rtBusyRereads{Store: store, reads: reads}
				rt := turnframe.New(busy)
				other := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
				bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "flight/7", "bump"))
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
					_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript)) // the case moves under the commit
					is.NoErr(err)
					busy.armed.Store(true)
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "booked"}})
				})
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.True(err != nil)                             // the read failed
				is.True(!errors.Is(err, turnframe.ErrConflict)) // no refusal of Execute's is known
				is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

				report, err := turnframe.New(store).Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)                                              // tried again
				is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // held by the attempt whose commit was refused
				is.Equal(h.callsOf("k-book"), 1)                           // and not run again while it is
			})
		})
	}
}
