package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
// again, the entry is still held by the attempt whose commit was refused,
// or, a local command's, Pending and run again.
func TestACommitConflictWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	cases := []struct {
		reads string
		opts  []turnframe.Option
		after turnframe.ResultKind // what Execute, tried again, reports
		calls int                  // the handler's calls by then
	}{
		{"entry", nil, turnframe.ResultInFlight, 1},    // held by the attempt whose commit was refused
		{"revision", nil, turnframe.ResultInFlight, 1}, // the same
		// A local command's entry stays Pending: tried again, it runs.
		{"revision", []turnframe.Option{turnframe.WithLocalCommand("book")}, turnframe.ResultCommitted, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s, local %v", c.reads, c.opts != nil), func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				busy := &rtBusyRereads{Store: store, reads: c.reads}
				rt := turnframe.New(busy, c.opts...)
				other := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
				bumpTurn := rtPlanned(t, other, rtAccount, rtCmd("k-bump", "flight/7", "bump"))
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					if n == 1 {
						_, err := other.Execute(ctx, rtAccount, bumpTurn, rtNewHandler(rtScript)) // the case moves under the commit
						is.NoErr(err)
						busy.armed.Store(true)
					}
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "booked"}})
				})
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.True(err != nil)                             // the read failed
				is.True(!errors.Is(err, turnframe.ErrConflict)) // no refusal of Execute's is known
				is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

				report, err := turnframe.New(store, c.opts...).Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)                             // tried again
				is.Equal(report.Results[0].Kind, c.after) // the entry as the refusal left it
				is.Equal(h.callsOf("k-book"), c.calls)    // run again only if nothing holds it
			})
		})
	}
}

// rtTakeRefusedOnItsClock refuses every take of an entry it is told of as the store
// does on its own clock, for a lease it judges still running (pgstore's
// DatabaseClock running behind this runtime's), and fails every read of
// the turn's phase after that, as a busy store does.
type rtTakeRefusedOnItsClock struct {
	turnframe.Store
	key     turnframe.IdempotencyKey
	refused atomic.Bool
}

func (s *rtTakeRefusedOnItsClock) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].To == turnframe.JournalExecuting {
		s.refused.Store(true)
		return turnframe.Applied{}, fmt.Errorf("%w: entry %q is held by its attempt (on the store's clock)", turnframe.ErrConflict, s.key)
	}
	return s.Store.Apply(ctx, w)
}

func (s *rtTakeRefusedOnItsClock) TurnPhase(ctx context.Context, a turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	if s.refused.Load() {
		return turnframe.TurnPhaseMarker{}, fmt.Errorf("read turn phase: %w", turnframe.ErrBusy)
	}
	return s.Store.TurnPhase(ctx, a, turn)
}

// A take-over the store refuses although the entry is still Executing
// under the dead attempt it named is the store judging the lease still
// running on its own clock, or the turn abandoned: the turn's phase, read
// again, tells which. When that read fails, nothing is known but the
// failed read, and Execute returns it, not the take's ErrConflict (which
// would say the turn was abandoned).
func TestARefusedTakeOverWhosePhaseRereadFailsIsNeverAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		rt := turnframe.New(store, turnframe.WithClock(clock.read))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.read(),
			Settle: []turnframe.Settlement{{Key: "k-book", To: turnframe.JournalExecuting,
				Attempt: turnframe.NewIDGenerator().AttemptID(clock.read()), Lease: time.Minute}}})
		is.NoErr(err)                                // an attempt takes it, and dies
		clock.set(clock.read().Add(2 * time.Minute)) // its lease ended, on this runtime's clock

		h := rtNewHandler(rtScript)
		refusing := &rtTakeRefusedOnItsClock{Store: store, key: "k-book"}
		_, err = turnframe.New(refusing, turnframe.WithClock(clock.read)).Execute(ctx, rtAccount, turn, h)
		is.True(err != nil)                             // the read failed
		is.True(!errors.Is(err, turnframe.ErrConflict)) // the turn was not abandoned
		is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err) // tried again, on a store that grants the take-over
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)
	})
}
