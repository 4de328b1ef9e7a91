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

// rtMovedFirst lets another attempt move key's entry just before this
// runtime's first write of it lands — a take of its own under a lease of an
// hour, or a local attempt's rejection — so the store refuses that write;
// the read of the entry after the refusal then fails, as a read on a busy
// store does.
type rtMovedFirst struct {
	turnframe.Store
	t     *testing.T
	key   turnframe.IdempotencyKey
	move  turnframe.Settlement
	moved bool
}

func (s *rtMovedFirst) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if !s.moved && len(w.Settle) == 1 && w.Settle[0].Key == s.key {
		s.moved = true
		move := s.move
		if move.To != turnframe.JournalOutcomeUnknown { // a reconciliation names no attempt
			move.Attempt = turnframe.NewIDGenerator().AttemptID(w.Now)
		}
		if _, err := s.Store.Apply(ctx, turnframe.Write{Account: w.Account, Turn: w.Turn, Now: w.Now, Settle: []turnframe.Settlement{move}}); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.Store.Apply(ctx, w)
}

func (s *rtMovedFirst) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.moved {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}

// A take, or a local command's settlement, that the store refuses because
// another attempt moved the entry first is no error of Execute: read again,
// the entry is in flight elsewhere or settled, and Execute reports it so.
// When that read fails, nothing is known but the failed read: ErrConflict
// would say the turn was abandoned, the case kept moving or the command
// was adopted, and a caller that tries again on ErrBusy would not. Execute
// returns the read's error, and tried again reports the entry as it is.
func TestARefusedTakeOrLocalSettlementWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	cases := []struct {
		name  string
		opts  []turnframe.Option
		move  turnframe.Settlement // what the other attempt does first
		after turnframe.ResultKind // what Execute, tried again, reports
	}{
		{"a take", nil,
			turnframe.Settlement{Key: "k-book", To: turnframe.JournalExecuting, Lease: time.Hour}, turnframe.ResultInFlight},
		{"a local settlement", []turnframe.Option{turnframe.WithLocalCommand("book")},
			turnframe.Settlement{Key: "k-book", To: turnframe.JournalRejected, Code: "sold_out"}, turnframe.ResultSkipped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				turn := rtPlanned(t, turnframe.New(store), rtAccount, rtCmd("k-book", "flight/7", "book"))
				moving := &rtMovedFirst{Store: store, t: t, key: "k-book", move: c.move}
				_, err := turnframe.New(moving, c.opts...).Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
				is.True(err != nil)                             // the read failed
				is.True(!errors.Is(err, turnframe.ErrConflict)) // nothing refused Execute itself
				is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

				h := rtNewHandler(rtScript)
				report, err := turnframe.New(store, c.opts...).Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)                             // tried again
				is.Equal(report.Results[0].Kind, c.after) // the entry as the other attempt left it
				is.Equal(h.callsOf("k-book"), 0)          // and not run here
			})
		})
	}
}

// The same for the declaration of a dead attempt of a command whose Remote
// forbids a blind rerun: another caller (a Recover, another Execute)
// declaring it first is no error, and a failed read after the refusal is
// that read's error, not ErrConflict.
func TestADeclarationBeatenByAnotherWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		f.takeAndDie(t, store, turnframe.AttemptID{})
		f.clock.set(f.clock.read().Add(time.Hour)) // its lease ended
		moving := &rtMovedFirst{Store: store, t: t, key: "k-charge",
			move: turnframe.Settlement{Key: "k-charge", To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}}
		h := rtNewHandler(rtScript)
		_, err := turnframe.New(moving, f.opts...).Execute(f.ctx, rtAccount, f.turn, h)
		is.True(err != nil)                             // the read failed
		is.True(!errors.Is(err, turnframe.ErrConflict)) // another's declaration is no error of Execute
		is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

		report, err := f.rt.Execute(f.ctx, rtAccount, f.turn, h)
		is.NoErr(err)                                             // tried again
		is.Equal(report.Results[0].Kind, turnframe.ResultUnknown) // declared, by the other
		is.Equal(h.callsOf("k-charge"), 0)                        // never run again
	})
}
