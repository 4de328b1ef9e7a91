package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// apBusyReread is apAdoptOnDecision whose read of the entry after the
// decision's refusal fails, as a read on a busy store does.
type apBusyReread struct {
	apAdoptOnDecision
	reads int
}

func (s *apBusyReread) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	s.reads++
	if s.reads == 2 {
		return turnframe.JournalEntry{}, fmt.Errorf("read entry: %w", turnframe.ErrBusy)
	}
	return s.Store.ByKey(ctx, a, k)
}

// A decision refused because a new turn adopted the entry meanwhile, whose
// read of the entry again fails, has not learnt that the key is unknown:
// ErrNotFound ("a key account never used") would tell the person deciding
// that the command does not exist, when it exists and still awaits them,
// and the caller would not try again. It reports the failed read.
func TestADecisionWhoseRereadFailsIsNeverNotFound(t *testing.T) {
	apEachDecision(t, func(t *testing.T, store turnframe.Store, approve bool) {
		is := is.New(t)
		cmd, turn := apAbandonedPay(t, store)
		racing := turnframe.New(&apBusyReread{apAdoptOnDecision: apAdoptOnDecision{Store: store, t: t, key: "k-pay", cmd: cmd}})
		decide, _ := apDecision(racing, approve)
		_, err := decide(context.Background(), rtAccount, "k-pay", "operator:alice", "")
		is.True(err != nil)                             // the read failed
		is.True(!errors.Is(err, turnframe.ErrNotFound)) // the key exists: never ErrNotFound
		is.True(errors.Is(err, turnframe.ErrBusy))      // the failure that stopped it, to try again
		e := rtEntry(t, store, "k-pay")
		is.Equal(e.Status, turnframe.JournalAwaitingApproval) // still awaiting, on the turn that adopted it
		is.True(e.Turn != turn)
	})
}

// apAdoptEveryDecision lets a new turn adopt the entry before every
// decision of key is written, and abandons that turn: a user who keeps
// writing while the person decides, each message given up.
type apAdoptEveryDecision struct {
	turnframe.Store
	t   *testing.T
	key turnframe.IdempotencyKey
	cmd turnframe.Command
}

func (s *apAdoptEveryDecision) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key &&
		(w.Settle[0].Code == turnframe.CodeApproved || w.Settle[0].Code == turnframe.CodeDenied) {
		rt := turnframe.New(s.Store)
		turn := rtPlanned(s.t, rt, w.Account, s.cmd) // adopts the awaiting entry
		if err := rt.Abandon(ctx, w.Account, turn, "user.left"); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.Store.Apply(ctx, w)
}

// A decision that gives up following an entry adopted again and again
// says the entry moved (ErrConflict), never that the key is unknown.
func TestADecisionOfAnEntryAdoptedAgainAndAgainIsAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		cmd, _ := apAbandonedPay(t, store)
		racing := turnframe.New(&apAdoptEveryDecision{Store: store, t: t, key: "k-pay", cmd: cmd})
		_, err := racing.Deny(context.Background(), rtAccount, "k-pay", "operator:alice", "")
		is.True(!errors.Is(err, turnframe.ErrNotFound)) // the key exists: never ErrNotFound
		is.True(errors.Is(err, turnframe.ErrConflict))  // it moved under the decision
		is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval)
	})
}
