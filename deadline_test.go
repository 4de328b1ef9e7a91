package turnframe_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// lateRounds is how often each late-answer test races an answer against its
// deadline. Before the answer was judged by when it was produced, about half
// of these rounds read the late answer.
const lateRounds = 200

// Application code that honours its context and answers after the deadline
// gives a late answer: it is never read, every time, and the call is
// outcome unknown (issue 11, item 1). The late answer is kept as evidence
// in the audit trail, moving nothing (issue 13).
func TestALateAnswerIsNeverRead(t *testing.T) {
	handlerOutcomes := []struct {
		name string
		out  turnframe.Outcome
	}{
		{"a late Reject", turnframe.Reject("card.declined")},
		{"a late Commit", turnframe.Commit(nil)},
	}
	for _, tt := range handlerOutcomes {
		t.Run("handler/"+tt.name, func(t *testing.T) {
			is := is.New(t)
			store := memstore.New()
			defer store.Close()
			signals := &recorder{}
			lateAnswers := signals.notify(turnframe.SignalLateAnswer)
			rt := turnframe.New(store, turnframe.WithCommandTimeout(time.Millisecond), turnframe.WithObserver(signals))
			late := turnframe.HandlerFunc(func(ctx context.Context, _ turnframe.Call) turnframe.Outcome {
				<-ctx.Done()
				return tt.out
			})
			for i := range lateRounds {
				key := turnframe.IdempotencyKey(fmt.Sprint("k", i))
				turn := rtPlanned(t, rt, rtAccount, rtCmd(key, "card/1", "charge"))
				report, err := rt.Execute(context.Background(), rtAccount, turn, late)
				is.NoErr(err)                                                            // execute
				is.Equal(report.Results[0].Kind, turnframe.ResultUnknown)                // never the late answer
				is.Equal(awaitLabels(t, lateAnswers, "late answer").Outcome, "recorded") // kept as evidence
				is.Equal(rtEntry(t, store, key).Status, turnframe.JournalOutcomeUnknown) // stored unknown
				evidence := evidenceOf(t, store, turnframe.JournalSubject(rtAccount, key), turnframe.CodeLateAnswer)
				is.Equal(len(evidence), 1)                           // one late answer
				is.Equal(evidence[0].From, evidence[0].To)           // that moved nothing
				is.Equal(evidence[0].Actor, turnframe.ActorApp)      // the handler's
				is.True(strings.Contains(evidence[0].Note, "after")) // saying it came too late
			}
		})
	}

	senderAnswers := []struct {
		name string
		out  turnframe.Dispatched
	}{
		{"a late Retryable", turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.dial"}},
		{"a late Completed", turnframe.Dispatched{Kind: turnframe.DispatchCompleted}},
		{"a late Permanent", turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.400"}},
	}
	for _, tt := range senderAnswers {
		t.Run("sender/"+tt.name, func(t *testing.T) {
			is := is.New(t)
			store := memstore.New()
			defer store.Close()
			var sends atomic.Int64
			late := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
				sends.Add(1)
				<-ctx.Done()
				return tt.out
			})
			cfg := turnframe.DefaultDispatchConfig("w1")
			cfg.SendTimeout = time.Millisecond
			signals := &recorder{}
			lateAnswers := signals.notify(turnframe.SignalLateAnswer)
			d := turnframe.NewDispatcher(store, late, cfg, turnframe.WithObserver(signals))
			for i := range lateRounds {
				rows := dispEnqueue(t, store, "acme", turnframe.IdempotencyKey(fmt.Sprint("k", i)), turnframe.OutboxMessage{Destination: "payments"})
				report, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)                                                               // run
				is.Equal(report.Unknown, []turnframe.OutboxID{rows[0].ID})                  // never the late answer
				is.Equal(dispGet(t, store, rows[0].ID).LastCode, turnframe.CodeSendTimeout) // as a timeout
				is.Equal(awaitLabels(t, lateAnswers, "late answer").Outcome, "recorded")    // kept as evidence
				evidence := evidenceOf(t, store, turnframe.OutboxSubject("acme", rows[0].ID), turnframe.CodeLateAnswer)
				is.Equal(len(evidence), 1)                                                     // one late answer
				is.Equal(evidence[0].From, evidence[0].To)                                     // that moved nothing
				is.Equal(evidence[0].Actor, turnframe.WorkerActor("w1"))                       // the worker's
				is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown) // still unknown
				later, err := d.RunOnce(context.Background(), dispNow.Add(time.Hour))
				is.NoErr(err)            // a later run
				is.True(later.IsEmpty()) // sends nothing again (I15)
			}
			is.Equal(sends.Load(), int64(lateRounds)) // each row sent once, ever
		})
	}

	t.Run("verifier/a late NotHappened", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		store := memstore.New()
		defer store.Close()
		// The send answers unknown at once, in time: a send that timed out
		// too would record a late answer of its own, and the round would
		// await that signal in place of the lookup's (at 1 ms, about one
		// round in thirty did on a loaded machine).
		cfg := turnframe.DefaultDispatchConfig("w1")
		unknown := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchUnknown}}
		d := turnframe.NewDispatcher(store, unknown, cfg, turnframe.WithClock(func() time.Time { return dispNow })) // the recovery's one clock
		late := turnframe.VerifierFunc(func(ctx context.Context, _ turnframe.Uncertain) turnframe.Verification {
			<-ctx.Done()
			return turnframe.Verification{Found: turnframe.FoundNotHappened} // would send it again
		})
		signals := &recorder{}
		lateAnswers := signals.notify(turnframe.SignalLateAnswer)
		// The clock stands still: each row is looked up once, and the rows
		// of earlier rounds wait for their backoff.
		r := turnframe.NewRecovery(store, turnframe.WithObserver(signals), turnframe.WithClock(func() time.Time { return dispNow }),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: late, VerifyTimeout: time.Millisecond}))
		rowsOnly := turnframe.RecoveryScope{Account: "nobody"} // the turns dispEnqueue left are not this test's
		for i := range lateRounds {
			rows := dispEnqueue(t, store, "acme", turnframe.IdempotencyKey(fmt.Sprint("k", i)), turnframe.OutboxMessage{Destination: "payments"})
			_, err := d.RunOnce(ctx, dispNow)
			is.NoErr(err) // run: unknown
			subject := turnframe.OutboxSubject("acme", rows[0].ID)
			report, err := r.Recover(ctx, rowsOnly, &recHandler{})
			is.NoErr(err)                                                                  // recover
			is.Equal(policyFor(t, report, subject).Outcome, turnframe.PolicyUnsure)        // never the late finding
			is.Equal(awaitLabels(t, lateAnswers, "late lookup").Outcome, "recorded")       // kept as evidence
			is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown) // still unknown
			trail := histLines(t, store, subject)
			is.True(slices.Contains(trail, "evidence:outcome_unknown policy "+turnframe.CodeVerifyUnsure)) // the lookup counted as unsure
			is.True(slices.Contains(trail, "evidence:outcome_unknown policy "+turnframe.CodeLateAnswer))   // and its answer as evidence
			is.Equal(unknown.count(rows[0].ID), 1)                                                         // not sent again
		}
	})
}

// An answer given in time counts, every time.
func TestAnAnswerInTimeCounts(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithCommandTimeout(time.Hour))
	prompt := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Reject("card.declined")
	})
	for i := range lateRounds {
		turn := rtPlanned(t, rt, rtAccount, rtCmd(turnframe.IdempotencyKey(fmt.Sprint("k", i)), "card/1", "charge"))
		report, err := rt.Execute(context.Background(), rtAccount, turn, prompt)
		is.NoErr(err)                                              // execute
		is.Equal(report.Results[0].Kind, turnframe.ResultRejected) // the answer
	}
}
