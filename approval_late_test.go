package turnframe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// readThenRace is a store whose first ByKey, once it has read, runs during:
// what another person and the app do between a decision's read of the
// entry and its write.
type readThenRace struct {
	turnframe.Store
	once   atomic.Bool
	during func()
}

func (s *readThenRace) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := s.Store.ByKey(ctx, a, k)
	if s.once.CompareAndSwap(false, true) {
		s.during()
	}
	return e, err
}

// TestALateSecondDecisionNeverMovesAnUnknownOutcome: Bob's decision reads
// the entry awaiting approval; before it writes, Alice approves it and the
// payment runs, its outcome unknown. Bob's write is a second decision:
// ErrConflict, and the unknown outcome stays for reconciliation — never
// resent (I15) nor recorded as denied, never run.
func TestALateSecondDecisionNeverMovesAnUnknownOutcome(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "SecondApprove", false: "LateDeny"}[approve], func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				var calls atomic.Int32
				pay := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
					calls.Add(1)
					return turnframe.Unknown("ch_1") // the card network timed out: it may have charged
				})
				rt := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, apPay("k-pay"))
				racing := &readThenRace{Store: store, during: func() {
					_, err := rt.Approve(ctx, rtAccount, "k-pay", "operator:alice", "ok")
					is.NoErr(err) // alice approves first
					_, err = rt.Execute(ctx, rtAccount, turn, pay)
					is.NoErr(err) // and the payment runs: outcome unknown
				}}
				late := turnframe.New(racing)
				decide := late.Deny
				if approve {
					decide = late.Approve
				}
				_, err := decide(ctx, rtAccount, "k-pay", "operator:bob", "")
				is.True(errors.Is(err, turnframe.ErrConflict))                               // a second decision
				is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalOutcomeUnknown) // left for reconciliation
				_, err = rt.Execute(ctx, rtAccount, turn, pay)
				is.NoErr(err)
				is.Equal(calls.Load(), int32(1)) // never run again
			})
		})
	}
}

// TestSettleNeverDecidesAnApproval: Recovery.Settle resolves uncertain
// outcomes. With an approval's or a denial's code its settlement would be
// exactly Runtime.Approve's or Deny's, so those codes are refused as input,
// and the entry keeps waiting for a person; nothing is counted reconciled.
func TestSettleNeverDecidesAnApproval(t *testing.T) {
	cases := []struct {
		name    string
		verdict turnframe.Verdict
		code    string
	}{
		{"ResendAsApproved", turnframe.VerdictResend, turnframe.CodeApproved},
		{"FailedAsDenied", turnframe.VerdictFailed, turnframe.CodeDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				signals := &recorder{}
				rtPlanned(t, turnframe.New(store), rtAccount, apPay("k-pay"))
				rec := turnframe.NewRecovery(store, turnframe.WithObserver(signals))
				err := rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-pay"),
					turnframe.Decision{Verdict: tc.verdict, Code: tc.code, Note: "settle, not approve"})
				is.True(errors.Is(err, turnframe.ErrInvalid))                                  // a decision's code
				is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval) // still waits for a person
				is.Equal(signals.count(turnframe.SignalExternalReconciled), 0)                 // nothing reconciled
			})
		})
	}
}

// A handler's rejection lands whatever its code, also the denial's (a
// remote that says the user denied it): only a settlement without an
// attempt that carries a decision's code is a decision, and a decision
// moves only an entry awaiting approval. The code is replaced: on the
// entry, CodeDenied says a person denied the command and it never ran.
func TestAHandlersRejectionWithADecisionCodeLands(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("pay-1", "order/1", "pay"))
		_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Reject(turnframe.CodeDenied)
		}))
		e := rtEntry(t, store, "pay-1")
		is.NoErr(err)                                     // a rejection is recorded whatever its code
		is.Equal(e.Status, turnframe.JournalRejected)     // the outcome lands
		is.Equal(e.Code, turnframe.CodeInvalidRejectCode) // not the code of a command that never ran
	})
}
