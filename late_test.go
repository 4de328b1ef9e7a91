package turnframe_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// lateSignals is an Observer that hands every SignalLateAnswer to a
// channel, so a test can block until a late answer was recorded.
type lateSignals chan turnframe.Labels

func (c lateSignals) Observe(s turnframe.Signal, l turnframe.Labels, _ time.Duration) {
	if s == turnframe.SignalLateAnswer {
		c <- l
	}
}

// lateRecord returns the one late-answer evidence of subject.
func lateRecord(t *testing.T, store turnframe.Store, s turnframe.Subject) turnframe.HistoryRecord {
	t.Helper()
	h, err := store.History(context.Background(), s, 0, 100)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var found []turnframe.HistoryRecord
	for _, r := range h {
		if r.Evidence && r.Code == turnframe.CodeLateAnswer {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d late-answer records, want 1: %+v", len(found), h)
	}
	return found[0]
}

func TestALateSendIsRecordedAsEvidenceThatMovesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			<-ctx.Done() // past its deadline…
			<-release    // …and later still, it answers
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200", RemoteRef: "ch_late"}
		})
		signals := make(lateSignals, 1)
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: 10 * time.Millisecond},
			turnframe.WithObserver(signals))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)
		is.Equal(report.Unknown, []turnframe.OutboxID{row.ID}) // the deadline passed: unknown

		once.Do(func() { close(release) })
		is.Equal(<-signals, turnframe.Labels{Outcome: "recorded"}) // the late answer was written
		rec := dispGet(t, store, row.ID)
		is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // and moved nothing
		is.Equal(rec.RemoteRef, "")
		ev := lateRecord(t, store, turnframe.OutboxSubject(rtAccount, row.ID))
		is.Equal(ev.From, "outcome_unknown")
		is.Equal(ev.To, "outcome_unknown")
		is.Equal(ev.RemoteRef, "ch_late")                        // what the remote said, kept for whoever settles it
		is.True(strings.Contains(ev.Note, "completed http.200")) // and how
		is.Equal(ev.Actor, turnframe.WorkerActor("w1"))
	})
}

func TestALateHandlerAnswerIsRecordedAsEvidenceThatMovesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		h := rtNewHandler(func(ctx context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			<-ctx.Done()
			<-release
			return turnframe.Reject("card.declined")
		})
		signals := make(lateSignals, 1)
		rt := turnframe.New(store, turnframe.WithCommandTimeout(10*time.Millisecond), turnframe.WithObserver(signals))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultUnknown)

		once.Do(func() { close(release) })
		is.Equal(<-signals, turnframe.Labels{Outcome: "recorded"})
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // moved nothing
		ev := lateRecord(t, store, turnframe.JournalSubject(rtAccount, "k-charge"))
		is.True(strings.Contains(ev.Note, "reject")) // what the late answer was
		is.Equal(ev.To, "outcome_unknown")
	})
}

func TestALateLookupIsRecordedAsEvidenceAndTheLookupCountsAsUnsure(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		verifier := turnframe.VerifierFunc(func(ctx context.Context, _ turnframe.Uncertain) turnframe.Verification {
			<-ctx.Done()
			<-release
			return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ch_2"}
		})
		signals := make(lateSignals, 1)
		rec := turnframe.NewRecovery(store, turnframe.WithObserver(signals), turnframe.WithClock(func() time.Time { return dispNow.Add(time.Minute) }),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: verifier, VerifyTimeout: 10 * time.Millisecond}))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyUnsure) // a hang is a lookup that could not tell

		once.Do(func() { close(release) })
		is.Equal(<-signals, turnframe.Labels{Outcome: "recorded"})
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown) // a late "happened" is not acted on
		ev := lateRecord(t, store, turnframe.OutboxSubject(rtAccount, row.ID))
		is.Equal(ev.RemoteRef, "ch_2")
		is.Equal(ev.Actor, turnframe.ActorPolicy)
	})
}
