package turnframe_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Two people deciding one payment at the worst moment: of many Approve and
// Deny calls racing on one awaiting entry, exactly one lands, every other
// is ErrConflict, the entry ends as that one decision says, and the trail
// holds one decision.
func TestOneApprovalDecisionLandsOfManyAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		rtPlanned(t, rt, rtAccount, apPay("k-pay"))

		const callers = 8
		start := make(chan struct{})
		type decision struct {
			approve bool
			err     error
		}
		results := make(chan decision, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					_, err = rt.Approve(ctx, rtAccount, "k-pay", "operator:alice", "")
				} else {
					_, err = rt.Deny(ctx, rtAccount, "k-pay", "operator:bob", "")
				}
				results <- decision{approve: i%2 == 0, err: err}
			}()
		}
		close(start)
		wg.Wait()
		close(results)

		var landed []decision
		for d := range results {
			if d.err == nil {
				landed = append(landed, d)
				continue
			}
			is.True(errors.Is(d.err, turnframe.ErrConflict)) // a decision already made is a conflict, nothing else
		}
		is.Equal(len(landed), 1) // exactly one decision landed
		_, want := apDecision(rt, landed[0].approve)
		is.Equal(rtEntry(t, store, "k-pay").Status, want) // and the entry says that one
		decisions := 0
		for _, h := range histOf(t, store, turnframe.JournalSubject(rtAccount, "k-pay")) {
			if h.From == turnframe.JournalAwaitingApproval.String() {
				decisions++
			}
		}
		is.Equal(decisions, 1) // one decision in the trail
	})
}

// apAbandonedPay plans apPay("k-pay"), which awaits approval, and
// abandons its turn: the user left before anyone decided, and the next
// turn's plan adopts the entry. It returns the command and that turn.
func apAbandonedPay(t *testing.T, store turnframe.Store) (turnframe.Command, turnframe.TurnID) {
	t.Helper()
	cmd := apPay("k-pay")
	rt := turnframe.New(store)
	turn := rtPlanned(t, rt, rtAccount, cmd)
	if err := rt.Abandon(context.Background(), rtAccount, turn, "user.left"); err != nil {
		t.Fatal(err)
	}
	return cmd, turn
}

// apDecision is rt's Approve or Deny, and the status it leaves an awaiting
// entry in.
func apDecision(rt *turnframe.Runtime, approve bool) (
	decide func(context.Context, turnframe.AccountID, turnframe.IdempotencyKey, turnframe.Actor, string) (turnframe.JournalEntry, error),
	want turnframe.JournalStatus) {
	if approve {
		return rt.Approve, turnframe.JournalPending
	}
	return rt.Deny, turnframe.JournalRejected
}

// apEachDecision runs body on each store, approving and then denying.
func apEachDecision(t *testing.T, body func(t *testing.T, store turnframe.Store, approve bool)) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approve", false: "deny"}[approve], func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) { body(t, store, approve) })
		})
	}
}

// apAdoptOnDecision is a store that, when an approval or a denial of key is
// written, first lets a new turn's plan adopt the awaiting entry from its
// abandoned turn: the user's next message racing an operator's click.
type apAdoptOnDecision struct {
	turnframe.Store
	t    *testing.T
	key  turnframe.IdempotencyKey
	cmd  turnframe.Command
	once bool
}

func (s *apAdoptOnDecision) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if !s.once && len(w.Settle) == 1 && w.Settle[0].Key == s.key &&
		(w.Settle[0].Code == turnframe.CodeApproved || w.Settle[0].Code == turnframe.CodeDenied) {
		s.once = true
		rtPlanned(s.t, turnframe.New(s.Store), w.Account, s.cmd) // adopts the awaiting entry
	}
	return s.Store.Apply(ctx, w)
}

// An awaiting entry of an abandoned turn that a new turn adopts while a
// person decides it: it is the same command, still awaiting, so the
// decision lands on it in its new turn — never ErrNotFound for an entry
// that exists.
func TestADecisionFollowsAnEntryAdoptedWhileItWasMade(t *testing.T) {
	apEachDecision(t, func(t *testing.T, store turnframe.Store, approve bool) {
		is := is.New(t)
		cmd, turn := apAbandonedPay(t, store)
		racing := turnframe.New(&apAdoptOnDecision{Store: store, t: t, key: "k-pay", cmd: cmd})
		decide, want := apDecision(racing, approve)
		got, err := decide(context.Background(), rtAccount, "k-pay", "operator:alice", "")
		is.NoErr(err) // decided, not ErrNotFound
		e := rtEntry(t, store, "k-pay")
		is.True(e.Turn != turn)    // on the turn that adopted it
		is.Equal(e.Status, want)   // as decided
		is.Equal(got.Status, want) // and reported so
	})
}
