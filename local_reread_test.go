package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// rtBusyReads is a Store whose reads of an entry by key fail as a busy
// store's do, once armed.
type rtBusyReads struct {
	turnframe.Store
	armed atomic.Bool
}

func (s *rtBusyReads) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.armed.Load() {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}

// A local command whose turn was abandoned and whose entry a new turn
// adopted while its handler ran: its settlement is refused as not found,
// and Execute reads the entry again to tell. When that read fails, Execute
// has not learnt that the turn or the entry is missing — both exist — and
// must not say ErrNotFound ("a turn that does not exist for account"): it
// reports the failed read.
func TestALocalCommandAdoptedWhileItRanWhoseRereadFailsIsNeverNotFound(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		busy := &rtBusyReads{Store: store}
		rt := turnframe.New(busy, turnframe.WithLocalCommand("book"), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		first := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, rt, first, "k-book", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
		is.NoErr(rt.Abandon(ctx, rtAccount, first, "user_left"))
		second := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book")) // adopts k-book
		is.Equal(rtEntry(t, store, "k-book").Turn, second)

		busy.armed.Store(true)
		_, err := finish()
		t.Logf("error: %v", err)
		is.True(err != nil)
		is.True(!errors.Is(err, turnframe.ErrNotFound)) // the turn and the entry both exist
		is.True(errors.Is(err, turnframe.ErrBusy))      // the read that failed, to try again
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0)
	})
}

// rtAdoptOnTake abandons the turn and lets a new turn's plan adopt key's
// entry just before Execute's take of it is written, then makes reads of
// entries fail as a busy store's do.
type rtAdoptOnTake struct {
	rtBusyReads
	t    *testing.T
	cmd  turnframe.Command
	once atomic.Bool
}

func (s *rtAdoptOnTake) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.cmd.Key && w.Settle[0].To == turnframe.JournalExecuting && s.once.CompareAndSwap(false, true) {
		rt := turnframe.New(s.Store)
		if err := rt.Abandon(ctx, w.Account, w.Turn, "user_left"); err != nil {
			s.t.Fatal(err)
		}
		rtPlanned(s.t, rt, w.Account, s.cmd) // adopts the entry
		s.armed.Store(true)
	}
	return s.Store.Apply(ctx, w)
}

// The same for a command Execute takes: a take refused as not found, the
// entry adopted by a new turn, whose read again fails, is never ErrNotFound.
func TestATakeOfAnEntryAdoptedMeanwhileWhoseRereadFailsIsNeverNotFound(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		cmd := rtCmd("k-pay", "order/1", "pay")
		first := rtPlanned(t, turnframe.New(store), rtAccount, cmd)
		racing := &rtAdoptOnTake{rtBusyReads: rtBusyReads{Store: store}, t: t, cmd: cmd}
		rt := turnframe.New(racing, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		calls := 0
		_, err := rt.Execute(context.Background(), rtAccount, first, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls++
			return turnframe.Commit(nil)
		}))
		t.Logf("error: %v", err)
		is.Equal(calls, 0)                              // never ran here
		is.True(err != nil)                             // not taken
		is.True(!errors.Is(err, turnframe.ErrNotFound)) // the turn and the entry both exist
		is.True(errors.Is(err, turnframe.ErrBusy))      // the read that failed
	})
}

// rtAdoptOnSettleBusy is rtAdoptOnSettle whose reads of entries fail as a
// busy store's do once the entry was adopted.
type rtAdoptOnSettleBusy struct {
	rtBusyReads
	t   *testing.T
	cmd turnframe.Command
}

func (s *rtAdoptOnSettleBusy) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.cmd.Key && w.Settle[0].Attempt.IsZero() && !s.armed.Load() {
		rtPlanned(s.t, turnframe.New(s.Store, rtAfterLeases()), w.Account, s.cmd) // adopts it, its lease having ended
		s.armed.Store(true)
	}
	return s.Store.Apply(ctx, w)
}

// And for an operator's settle of a stranded entry a new turn adopts
// meanwhile: its read again failing, Settle reports that read, never
// ErrNotFound ("a subject that does not exist").
func TestSettlingAnEntryAdoptedMeanwhileWhoseRereadFailsIsNeverNotFound(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		cmd := rtCmd("k-charge", "card/1", "charge")
		rtStranded(t, store, cmd)

		racing := &rtAdoptOnSettleBusy{rtBusyReads: rtBusyReads{Store: store}, t: t, cmd: cmd}
		err := turnframe.NewRecovery(racing, rtAfterLeases()).Settle(context.Background(), turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:alice"})
		t.Logf("error: %v", err)
		is.True(!errors.Is(err, turnframe.ErrNotFound)) // it exists
		is.True(errors.Is(err, turnframe.ErrBusy))      // the read that failed
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalExecuting)
	})
}

// rtAdoptBeforeOneBusyRead is rtAdoptBefore whose first read of an entry
// after the write it raced fails as a busy store's does.
type rtAdoptBeforeOneBusyRead struct {
	*rtAdoptBefore
	armed atomic.Bool
}

func (s *rtAdoptBeforeOneBusyRead) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	a, err := s.rtAdoptBefore.Apply(ctx, w)
	if errors.Is(err, turnframe.ErrNotFound) {
		s.armed.Store(true)
	}
	return a, err
}

func (s *rtAdoptBeforeOneBusyRead) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.armed.CompareAndSwap(true, false) {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.rtAdoptBefore.ByKey(ctx, a, k)
}

// And for Recover's declaration of a stranded attempt: never ErrNotFound.
func TestARecoverWhoseStrandedCommandIsAdoptedAndWhoseRereadFailsIsNeverNotFound(t *testing.T) {
	cmd := rtCmd("k-charge", "card/1", "charge")
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		turn := rtStranded(t, store, cmd) // the process died and its turn was given up
		racing := &rtAdoptBeforeOneBusyRead{rtAdoptBefore: &rtAdoptBefore{Store: store, t: t, from: turn, key: cmd.Key, to: turnframe.JournalOutcomeUnknown, cmd: cmd, adopted: make(chan turnframe.TurnID, 1)}}
		rec := turnframe.NewRecovery(racing, rtAfterLeases(), quiet, turnframe.WithCommand("charge", turnframe.Remote{}))
		report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, &rtResumer{rt: turnframe.New(racing, rtAfterLeases(), quiet), h: rtNewHandler(rtScript)})
		is.NoErr(err)
		<-racing.adopted
		is.Equal(len(report.Policy), 1)
		t.Logf("policy error: %v", report.Policy[0].Err)
		is.True(!errors.Is(report.Policy[0].Err, turnframe.ErrNotFound)) // the entry exists
		is.True(errors.Is(report.Policy[0].Err, turnframe.ErrBusy))      // the read that failed
	})
}
