package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// The inbound side under faults: a message received under a channel's id,
// planned with a local command, a command that needs approval, a plain one
// and one no handler is registered for, executed through a Mux, delivered,
// approved, executed again. Whatever store call fails, the channel's
// redelivery, recovery and the operator's second decision finish it: one
// turn per message, each command settled once.

const kLocal = "local1" // a local command: commits one event and one row, calls nothing outside

func inboundPlan(text string) turnframe.Plan {
	k := func(i int) turnframe.IdempotencyKey { return turnframe.IdempotencyKey(fmt.Sprintf("%s-%d", text, i)) }
	c := turnframe.CaseKey("case-" + text)
	return turnframe.Plan{Commands: []turnframe.Command{
		{Key: k(0), Case: c, Name: kLocal},
		{Key: k(1), Case: c, Name: kEnqueue1, NeedsApproval: true},
		{Key: k(2), Case: c, Name: kEnqueue1},
		{Key: k(3), Case: c, Name: "nohandler"},
	}}
}

type inboundApp struct {
	resumer
	mux *turnframe.Mux

	mu         sync.Mutex
	localCalls map[turnframe.IdempotencyKey]int
}

func newInboundApp(store turnframe.Store, dom *domain, now time.Time) *inboundApp {
	opts := []turnframe.Option{turnframe.WithClock(func() time.Time { return now }), turnframe.WithLocalCommand(kLocal)}
	a := &inboundApp{mux: &turnframe.Mux{}, localCalls: map[turnframe.IdempotencyKey]int{}}
	a.resumer = resumer{rt: turnframe.New(store, opts...), rec: turnframe.NewRecovery(store, opts...), h: a.mux, plan: inboundPlan}
	a.mux.Register(kEnqueue1, dom)
	a.mux.RegisterFunc(kLocal, func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
		a.mu.Lock()
		a.localCalls[c.Command.Key]++
		a.mu.Unlock()
		return turnframe.Commit([]turnframe.Event{{Case: c.Command.Case, Type: kLocal}},
			turnframe.OutboxMessage{Destination: "remote", Payload: []byte(c.Command.Key)})
	})
	return a
}

var inboundMsg = turnframe.Inbound{Account: faultAccount, MessageID: "upd-1", Text: "M"}

// receive delivers the message and, when it began a turn, runs it through
// delivery; a redelivery is left alone, as the app must.
func (a *inboundApp) receive(ctx context.Context, in turnframe.Inbound) (turnframe.Received, error) {
	r, err := a.rt.ReceiveMessage(ctx, in)
	if err != nil || r.Redelivered {
		return r, err
	}
	if _, err := a.rt.Plan(ctx, in.Account, r.Turn, inboundPlan(in.Text)); err != nil {
		return r, err
	}
	return r, a.finish(ctx, in.Account, r.Turn)
}

func (a *inboundApp) recoverAll(t *testing.T) {
	t.Helper()
	for range 5 {
		rep, err := a.rec.Recover(bg, turnframe.RecoveryScope{}, a)
		for _, err := range recoverErrors(rep, err) {
			if err != nil {
				t.Fatalf("recover without faults: %v", err)
			}
		}
		if rep.Turns.Turns == 0 && len(rep.Policy) == 0 && len(rep.Expired) == 0 {
			return
		}
		// A delivered turn whose entry awaits approval stays listed.
		if len(rep.AwaitingApproval) > 0 && rep.Turns.Turns == len(rep.AwaitingApproval) && len(rep.Policy) == 0 {
			return
		}
	}
	t.Fatal("turns still unfinished after five recoveries")
}

func TestInboundFaults(t *testing.T) {
	eachFault(t, func(t *testing.T, k storeKind, fs *faultStore, n int, mode failMode) {
		is := is.New(t)
		dom := newDomain()
		in := inboundMsg
		in.Conversation = turnframe.NewIDGenerator().ConversationID(t0)
		a := newInboundApp(fs, dom, t0)
		fs.arm(n, mode)
		var errs []error
		first, err := a.receive(bg, in)
		errs = append(errs, err)
		if err == nil {
			_, err = a.rt.Approve(bg, faultAccount, "M-1", turnframe.ActorOperator, "ok")
			errs = append(errs, err)
		}
		if err == nil {
			_, err = a.rt.Execute(bg, faultAccount, first.Turn, a.mux)
			errs = append(errs, err)
		}
		surfaced(t, fs, errs...)
		fs.disarm()

		// The channel saw no quick answer and delivers again; a restart past
		// the leases recovers; the operator decides again if the first
		// decision is not there.
		b := newInboundApp(fs, dom, t0.Add(afterLeases))
		again, err := b.receive(bg, in)
		is.NoErr(err) // a redelivery is answered
		if first.Turn != (turnframe.TurnID{}) {
			is.True(again.Redelivered)       // the first delivery's turn is found
			is.Equal(again.Turn, first.Turn) // the same turn
		}
		b.recoverAll(t)
		e, err := fs.ByKey(bg, faultAccount, "M-1")
		is.NoErr(err) // the approval command was admitted
		if e.Status == turnframe.JournalAwaitingApproval {
			_, err := b.rt.Approve(bg, faultAccount, "M-1", turnframe.ActorOperator, "again")
			is.NoErr(err) // the operator's second decision
		} else {
			_, err := b.rt.Approve(bg, faultAccount, "M-1", turnframe.ActorOperator, "again")
			is.True(errors.Is(err, turnframe.ErrConflict)) // decided already
		}
		b.recoverAll(t)

		// One turn for the message, its commands settled once each.
		third, err := b.rt.ReceiveMessage(bg, in)
		is.NoErr(err)
		is.True(third.Redelivered)
		is.Equal(third.Phase, turnframe.PhaseDelivered)
		if first.Turn != (turnframe.TurnID{}) {
			is.Equal(third.Turn, first.Turn)
		}
		entries := settledOnce(t, fs, dom, inboundPlan("M"), func(cmd turnframe.Command) (turnframe.JournalStatus, int) {
			if cmd.Key == "M-3" {
				return turnframe.JournalRejected, 0 // no handler: refused
			}
			return turnframe.JournalCommitted, 1
		})
		for _, e := range entries {
			is.Equal(e.Turn, third.Turn) // the message's one turn
		}
		is.Equal(entries[3].Code, turnframe.CodeNoHandler) // M-3, refused for want of a handler
		rows := rowsOf(t, fs)
		total := 0
		for key, rs := range rows {
			is.Equal(len(rs), 1) // one row per committing command
			_ = key
			total += len(rs)
		}
		is.Equal(total, 3)
		unfinished, err := fs.ListUnfinishedTurns(bg, turnframe.RecoveryScope{}, 100)
		is.NoErr(err)
		is.Equal(len(unfinished), 0) // nothing left
	})
}
