package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// hungAfterRefusal refuses every Write that would settle an entry unknown,
// as a store that went away would; a read after such a refusal hangs as a
// pool with no free connection does, until its context ends. A read whose
// context can never end is not waited on (the test would hang): it is
// counted, and fails.
type hungAfterRefusal struct {
	turnframe.Store
	mu        sync.Mutex
	refused   bool
	unbounded int
	refusing  func() // runs as a write is refused
}

func (s *hungAfterRefusal) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	for _, st := range w.Settle {
		if st.To == turnframe.JournalOutcomeUnknown {
			s.mu.Lock()
			s.refused = true
			s.mu.Unlock()
			s.refusing()
			return turnframe.Applied{}, turnframe.ErrClosed
		}
	}
	return s.Store.Apply(ctx, w)
}

func (s *hungAfterRefusal) ByKey(ctx context.Context, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	s.mu.Lock()
	refused := s.refused
	if refused && ctx.Done() == nil {
		s.unbounded++
	}
	s.mu.Unlock()
	if !refused {
		return s.Store.ByKey(ctx, account, key)
	}
	if ctx.Done() == nil {
		return turnframe.JournalEntry{}, errors.New("hung: this read would never end")
	}
	<-ctx.Done()
	return turnframe.JournalEntry{}, ctx.Err()
}

// The handler's unknown outcome is refused by a store that went away, and
// Execute's caller gives up meanwhile. The read that
// tells the log's level is made past the caller, as the write was; but on
// a store that hangs (a pool with no free connection) a read with nothing
// to end it kept Execute from ever returning to a caller that had given
// up. It is bounded: Execute returns, the outcome logged as an error.
func TestTheReadAfterARefusedUnknownOutcomeCanEnd(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		logs := &levelLog{msg: "turnframe: command outcome could not be recorded"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hung := &hungAfterRefusal{Store: store, refusing: cancel} // the caller gives up
		rt := turnframe.New(hung, turnframe.WithLogger(slog.New(logs)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Unknown("timeout")
		})
		_, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(err != nil)                                  // the outcome was refused
		is.Equal(hung.unbounded, 0)                          // no read that could hang for ever
		is.Equal(logs.seen(), []slog.Level{slog.LevelError}) // the entry unread: an operator must know
	})
}
