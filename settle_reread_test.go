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

// rtEscalatedFirst has the policy escalate key's entry (a reconciliation
// to NeedsIntervention) just before the first settlement of it that it is
// asked for lands, so the store refuses that settlement, fenced on the
// status its caller read; every read of the entry after that fails, as a
// read on a busy store does.
type rtEscalatedFirst struct {
	turnframe.Store
	t     *testing.T
	key   turnframe.IdempotencyKey
	moved atomic.Bool
}

func (s *rtEscalatedFirst) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key && s.moved.CompareAndSwap(false, true) {
		escalate := turnframe.Write{Account: w.Account, Turn: w.Turn, Now: w.Now, Actor: turnframe.ActorPolicy,
			Settle: []turnframe.Settlement{{Key: s.key, To: turnframe.JournalNeedsIntervention, Code: turnframe.CodeNoSafeResolution}}}
		if _, err := s.Store.Apply(ctx, escalate); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.Store.Apply(ctx, w)
}

func (s *rtEscalatedFirst) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if s.moved.Load() {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}

// A person's Settle refused because the entry moved since it was read (the
// policy escalated it meanwhile) is read again and tried again: a person
// settles an entry that needs intervention as one whose outcome is
// unknown. When that read fails, the refusal says nothing about the
// decision: ErrConflict would tell the person a concurrent settle won, or
// that the entry's outcome is not unknown, and the page that called Settle
// would not offer a retry. Settle returns the read's error; tried again,
// it lands.
func TestASettleRefusedForAMoveWhoseRereadFailsIsNeverAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		_, err := f.rt.Execute(f.ctx, rtAccount, f.turn, rtNewHandler(func(context.Context, turnframe.Call, int) turnframe.Outcome {
			return turnframe.Unknown("")
		}))
		is.NoErr(err)
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		done := turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator, Note: "the card was charged"}

		moving := &rtEscalatedFirst{Store: store, t: t, key: "k-charge"}
		err = turnframe.NewRecovery(moving, f.opts...).Settle(f.ctx, subject, done)
		is.True(err != nil)                             // the read failed
		is.True(!errors.Is(err, turnframe.ErrConflict)) // no concurrent settle won
		is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again

		is.NoErr(turnframe.NewRecovery(store, f.opts...).Settle(f.ctx, subject, done)) // tried again, it lands
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
	})
}
