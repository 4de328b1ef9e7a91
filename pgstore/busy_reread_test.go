package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// busyReads fails the first read of a case's revision, and, once armed,
// every read of a turn's phase, as reads on a busy store do.
type busyReads struct {
	turnframe.Store
	revisionFailed bool
	phaseFails     bool
}

func (s *busyReads) CaseRevision(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if !s.revisionFailed {
		s.revisionFailed = true
		return 0, fmt.Errorf("read revision: %w", turnframe.ErrBusy)
	}
	return s.Store.CaseRevision(ctx, a, c)
}

func (s *busyReads) TurnPhase(ctx context.Context, a turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	if s.phaseFails {
		return turnframe.TurnPhaseMarker{}, fmt.Errorf("read turn: %w", turnframe.ErrBusy)
	}
	return s.Store.TurnPhase(ctx, a, turn)
}

// The root package's TestABusyRevisionReadNeverLeavesAnEntryHeldByAnAttemptThatNeverRan,
// TestARefusedTakeOrLocalSettlementWhoseRereadFailsIsNeverAConflict and
// TestAWriteRefusedForAMovedPhaseWhoseRereadFailsIsNeverAConflict, on
// PostgreSQL: a busy read of the revision leaves the entry Pending, run by
// the next Execute and never declared unknown; a take another attempt's
// beat, whose read of the entry again fails, is that read's ErrBusy; a
// repeat Plan refused for the phase another Plan moved, whose read of the
// phase again fails, is that read's ErrBusy, and lands when tried again.
func TestBusyReadsAroundATakeAndAPlanAreNeverMisreported(t *testing.T) {
	ctx := context.Background()
	book := turnframe.Command{Key: "k-book", Case: "flight/7", Name: "book", Payload: []byte("7A")}
	commit := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "booked"}})
	})

	t.Run("revision", func(t *testing.T) {
		is := is.New(t)
		store := mustOpen(t)
		opts := []turnframe.Option{turnframe.WithCommandTimeout(time.Minute), turnframe.WithCommand("book", turnframe.Remote{})}
		rt := turnframe.New(store, opts...)
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "a seat")
		is.NoErr(err)
		_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{book}})
		is.NoErr(err)
		_, err = turnframe.New(&busyReads{Store: store}, opts...).Execute(ctx, "acme", turn, commit)
		is.True(errors.Is(err, turnframe.ErrBusy)) // the read failed
		e, err := store.ByKey(ctx, "acme", "k-book")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalPending) // no attempt holds it
		report, err := rt.Execute(ctx, "acme", turn, commit)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // run by the next Execute
	})

	t.Run("take", func(t *testing.T) {
		is := is.New(t)
		store := mustOpen(t)
		rt := turnframe.New(store)
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "a seat")
		is.NoErr(err)
		_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{book}})
		is.NoErr(err)
		_, err = turnframe.New(&takenFirst{Store: store, t: t}).Execute(ctx, "acme", turn, commit)
		is.True(!errors.Is(err, turnframe.ErrConflict)) // another attempt's take is no error of Execute
		is.True(errors.Is(err, turnframe.ErrBusy))      // the read that failed
		report, err := rt.Execute(ctx, "acme", turn, commit)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // tried again: the other attempt holds it
	})

	t.Run("phase", func(t *testing.T) {
		is := is.New(t)
		store := mustOpen(t)
		rt := turnframe.New(store)
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "a seat")
		is.NoErr(err)
		plan := turnframe.Plan{Commands: []turnframe.Command{book}}
		_, err = rt.Plan(ctx, "acme", turn, plan) // another flow's plan lands first
		is.NoErr(err)
		_, err = turnframe.New(&busyReads{Store: store, revisionFailed: true, phaseFails: true}).Plan(ctx, "acme", turn, plan)
		is.True(!errors.Is(err, turnframe.ErrConflict)) // a repeat: nothing refused it
		is.True(errors.Is(err, turnframe.ErrBusy))      // the read that failed
		report, err := rt.Plan(ctx, "acme", turn, plan)
		is.NoErr(err) // tried again, the repeat lands
		is.Equal(report.Admissions[0].Kind, turnframe.AdmittedByThisTurn)
	})
}

// takenFirst has another attempt take the entry of the first settlement it
// forwards, under a lease of an hour, so the store refuses that take; every
// read of an entry after that fails, as a read on a busy store does.
type takenFirst struct {
	turnframe.Store
	t     *testing.T
	taken bool
}

func (s *takenFirst) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if !s.taken && len(w.Settle) == 1 {
		s.taken = true
		take := turnframe.Settlement{Key: w.Settle[0].Key, To: turnframe.JournalExecuting, Lease: time.Hour,
			Attempt: turnframe.NewIDGenerator().AttemptID(w.Now)}
		if _, err := s.Store.Apply(ctx, turnframe.Write{Account: w.Account, Turn: w.Turn, Now: w.Now, Settle: []turnframe.Settlement{take}}); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.Store.Apply(ctx, w)
}

func (s *takenFirst) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.taken {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}
