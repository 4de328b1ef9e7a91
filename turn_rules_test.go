package turnframe_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func TestRuntimeKeepsThePhaseRules(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime)
	}{
		{"deliver with a pending entry is a conflict", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "book"))
			err := rt.Deliver(context.Background(), rtAccount, turn, "done")
			is.True(errors.Is(err, turnframe.ErrConflict))            // pending
			is.Equal(rtPhase(t, store, turn), turnframe.PhasePlanned) // unchanged
		}},
		{"deliver with an unknown entry is allowed", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			ctx := context.Background()
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "card/1", "charge"))
			_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)                                                               // execute
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "we are verifying your payment")) // an honest answer
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseDelivered)
		}},
		{"plan on a delivered turn is a conflict that says so", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			ctx := context.Background()
			turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "hello")
			is.NoErr(err)
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "hi")) // a turn with no command
			_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k1", "flight/7", "book")}})
			is.True(errors.Is(err, turnframe.ErrConflict))      // refused
			is.True(strings.Contains(err.Error(), "delivered")) // naming why
			_, err = store.ByKey(ctx, rtAccount, "k1")
			is.True(errors.Is(err, turnframe.ErrNotFound)) // nothing admitted
		}},
		{"plan after execution started is a conflict", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			ctx := context.Background()
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "book"))
			_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k2", "flight/7", "book")}})
			is.True(errors.Is(err, turnframe.ErrConflict)) // phases only move forward
		}},
		{"an abandoned turn keeps its code and runs nothing", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			ctx := context.Background()
			understanding := &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Unit: 7}}}
			turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book")
			is.NoErr(err)
			_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Understanding: understanding, Commands: []turnframe.Command{rtCmd("k1", "flight/7", "book")}})
			is.NoErr(err)
			is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user_left")) // abandon
			replay, err := store.Replay(ctx, rtAccount, turn)
			is.NoErr(err)
			is.Equal(replay.AbandonCode, "user_left")     // the code kept
			is.Equal(replay.Understanding, understanding) // with the plan's understanding
			h := rtNewHandler(rtScript)
			_, err = rt.Execute(ctx, rtAccount, turn, h)
			is.True(errors.Is(err, turnframe.ErrConflict))                                       // refused
			is.Equal(h.callsOf("k1"), 0)                                                         // nothing ran
			is.True(errors.Is(rt.Abandon(ctx, rtAccount, turn, "again"), turnframe.ErrConflict)) // terminal
			is.True(errors.Is(rt.Deliver(ctx, rtAccount, turn, "late"), turnframe.ErrConflict))  // terminal
		}},
		{"a turn with no command can be executed and delivered", func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) {
			is := is.New(t)
			ctx := context.Background()
			turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "")
			is.NoErr(err) // empty text is allowed
			_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{})
			is.NoErr(err)
			report, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			is.Equal(len(report.Results), 0)                 // nothing to run
			is.Equal(report.Phase, turnframe.PhasePlanned)   // and no write
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "ok")) // deliver
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				tt.run(t, store, turnframe.New(store))
			})
		})
	}
}

func TestRuntimeRecognisesAKeyAcrossTurns(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		h := rtNewHandler(rtScript)
		first := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		_, err := rt.Execute(ctx, rtAccount, first, h)
		is.NoErr(err)

		// The outbox row is sent and pruned: the key must still deduplicate.
		now := time.Now().Add(time.Hour)
		claims, err := store.ClaimDue(ctx, now, 10, "worker", time.Minute)
		is.NoErr(err)
		is.Equal(len(claims), 1) // the row
		is.NoErr(turnframe.CompleteClaim(ctx, store, claims[0], "remote-1", now))
		pruned, err := store.Prune(ctx, now.Add(time.Hour))
		is.NoErr(err)
		is.Equal(pruned, 1) // pruned

		second, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book it again")
		is.NoErr(err)
		planned, err := rt.Plan(ctx, rtAccount, second, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-book", "flight/7", "book")}})
		is.NoErr(err) // the same command under the same key
		entries := planned.Entries()
		is.Equal(entries[0].Turn, first)                        // is the first turn's entry
		is.Equal(entries[0].Status, turnframe.JournalCommitted) // already committed
		report, err := rt.Execute(ctx, rtAccount, second, h)
		is.NoErr(err)
		is.Equal(len(report.Results), 0)                                                                        // nothing of its own to run
		is.Equal(h.callsOf("k-book"), 1)                                                                        // never ran again
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7"), map[turnframe.IdempotencyKey]int{"k-book": 1}) // one commit

		third, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book another")
		is.NoErr(err)
		_, err = rt.Plan(ctx, rtAccount, third, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-new", "flight/7", "book"), rtCmd("k-book", "flight/9", "book")}})
		is.True(errors.Is(err, turnframe.ErrConflict))              // the key for another command
		is.Equal(rtPhase(t, store, third), turnframe.PhaseReceived) // nothing written
		_, err = store.ByKey(ctx, rtAccount, "k-new")
		is.True(errors.Is(err, turnframe.ErrNotFound)) // not even the command before it

		// Keys are per account: another tenant may use the same one.
		other := rtPlanned(t, rt, rtOther, rtCmd("k-book", "flight/9", "refuse"))
		report, err = rt.Execute(ctx, rtOther, other, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultRejected) // its own command ran
	})
}

func TestRuntimeRefusesAnOutcomeTheHandlerGotWrong(t *testing.T) {
	tests := []struct {
		name string
		out  func(call turnframe.Call) turnframe.Outcome
	}{
		{"events of another case", func(call turnframe.Call) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: "flight/99", Type: "booked"}}, turnframe.OutboxMessage{Destination: "payments"})
		}},
		{"the zero outcome", func(turnframe.Call) turnframe.Outcome { return turnframe.Outcome{} }},
		{"an event without a type", func(call turnframe.Call) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "book"))
				report, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
					return tt.out(call)
				}))
				is.True(errors.Is(err, turnframe.ErrInvalid))                                 // a programming error
				is.Equal(report.Results[0].Kind, turnframe.ResultPending)                     // reported pending
				is.True(rtEntry(t, store, "k1").Status.IsPending())                           // and pending in the journal
				is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7", "flight/99")), 0) // no event
				is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)                           // no row
			})
		})
	}
}

// Settle settles a command whose outcome is unknown by the verdict the
// remote gave: in one transaction, signalled, recorded in the audit trail.
// Only a resend runs it again, under its key.
func TestSettleSettlesAnUnknownCommand(t *testing.T) {
	tests := []struct {
		decision turnframe.Decision
		status   turnframe.JournalStatus
		code     string // the entry's code after
		ref      string // the entry's remote reference after
		signaled bool
	}{
		{turnframe.Decision{Verdict: turnframe.VerdictCompleted, Code: "ops.found", RemoteRef: "ch_1"}, turnframe.JournalCommitted, "ops.found", "ch_1", true},
		{turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "card_declined"}, turnframe.JournalRejected, "card_declined", "", true},
		{turnframe.Decision{Verdict: turnframe.VerdictResend}, turnframe.JournalPending, "", "", true},
		{turnframe.Decision{Verdict: turnframe.VerdictResend, Code: "ops.never_arrived"}, turnframe.JournalPending, "ops.never_arrived", "", true},
		{turnframe.Decision{Verdict: turnframe.VerdictEscalate, Code: "ops.look"}, turnframe.JournalNeedsIntervention, "ops.look", "ref-k-charge", true},
		{turnframe.Decision{Verdict: turnframe.VerdictUnresolved}, turnframe.JournalOutcomeUnknown, "", "ref-k-charge", false},
	}
	for _, tt := range tests {
		t.Run(tt.decision.Verdict.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				h := rtNewHandler(rtScript)
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(rtEntry(t, store, "k-charge").RemoteRef, "ref-k-charge") // the remote's reference kept
				subject := turnframe.JournalSubject(rtAccount, "k-charge")
				unknownTrail := histLines(t, store, subject)

				rec := &recorder{}
				is.NoErr(turnframe.NewRecovery(store, turnframe.WithObserver(rec)).Settle(ctx, subject, tt.decision)) // settle
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, tt.status) // the verdict's status
				is.Equal(e.Code, tt.code)     // the code, where the status keeps one
				is.Equal(e.RemoteRef, tt.ref) // the reference given, or kept
				want := []turnframe.Labels(nil)
				trail := append(slices.Clone(unknownTrail), strings.TrimSpace("outcome_unknown>"+tt.status.String()+" app "+tt.code))
				if !tt.signaled {
					trail = unknownTrail
				} else if tt.decision.Verdict != turnframe.VerdictEscalate { // escalated, it is still unknown
					want = []turnframe.Labels{{Command: "charge", Outcome: tt.decision.Verdict.String()}}
				}
				is.Equal(rec.labels(turnframe.SignalExternalReconciled), want) // the signal
				is.Equal(histLines(t, store, subject), trail)                  // the audit trail

				report, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				if tt.decision.Verdict == turnframe.VerdictResend {
					is.Equal(h.callsOf("k-charge"), 2)                        // a resend runs again, under its key
					is.Equal(report.Results[0].Kind, turnframe.ResultUnknown) // (the script says unknown again)
					is.True(report.Results[0].Ran)
					return
				}
				is.Equal(h.callsOf("k-charge"), 1)            // nothing else ever runs it again
				is.Equal(report.Results[0].Status, tt.status) // and Execute reports it as it is
			})
		})
	}
	t.Run("an entry that is not uncertain is a conflict", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			rt := turnframe.New(store)
			r := turnframe.NewRecovery(store)
			subject := turnframe.JournalSubject(rtAccount, "k-book")
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-later", "flight/8", "book"))
			err := r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted})
			is.True(errors.Is(err, turnframe.ErrConflict)) // pending
			_, err = rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			trail := histLines(t, store, subject)
			err = r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictResend})
			is.True(errors.Is(err, turnframe.ErrConflict)) // committed
			err = r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictEscalate})
			is.True(errors.Is(err, turnframe.ErrConflict))                                             // not even to a person
			is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted)                   // unchanged
			is.Equal(histLines(t, store, subject), trail)                                              // nothing recorded
			is.NoErr(r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictUnresolved})) // an unresolved verdict writes nothing, whatever the entry
			is.Equal(histLines(t, store, subject), trail)
		})
	})
	t.Run("an entry that needs intervention is settled only by the app or a person", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			rt := turnframe.New(store)
			r := turnframe.NewRecovery(store)
			subject := turnframe.JournalSubject(rtAccount, "k-charge")
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
			_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			_, err = store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: time.Now(), Actor: turnframe.ActorPolicy,
				Settle: []turnframe.Settlement{{Key: "k-charge", From: turnframe.JournalOutcomeUnknown, To: turnframe.JournalNeedsIntervention}}})
			is.NoErr(err) // the policy escalates
			for _, actor := range []turnframe.Actor{turnframe.ActorPolicy, turnframe.ActorRecovery, turnframe.WorkerActor("w1")} {
				err = r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: actor})
				is.True(errors.Is(err, turnframe.ErrInvalid)) // turnframe's own actors may not: Settle takes none of them
				_, err = store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: time.Now(), Actor: actor,
					Settle: []turnframe.Settlement{{Key: "k-charge", From: turnframe.JournalNeedsIntervention, To: turnframe.JournalCommitted}}})
				is.True(errors.Is(err, turnframe.ErrConflict)) // nor does the store move it for them
			}
			err = r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorOperator})
			is.True(errors.Is(err, turnframe.ErrConflict))                                     // nor is it escalated twice
			is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention) // unchanged
			is.NoErr(r.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "card_declined", Actor: "operator:alice", Note: "the bank says no"}))
			is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalRejected) // a person may
			last := histOf(t, store, subject)
			is.Equal(histLine(last[len(last)-1]), "needs_intervention>rejected operator:alice card_declined") // recorded with who
			is.Equal(last[len(last)-1].Note, "the bank says no")                                              // and why
		})
	})
}
