package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The policy resends an unknown row to a destination that deduplicates only
// while the remote remembers the row's key (created less than Deduplicates
// ago). The row then waits, Pending, for a dispatcher to claim it; a claim
// that comes after the remote forgot the key — the dispatcher was down, or
// the resend was claimed and put back unsent, or the remote answered it
// retryable and the retry came late — would be the blind send the policy
// refuses, and a charge that landed would land twice. The Dispatcher
// withholds it: the sender is not called, the row is unknown again
// (CodeKeyForgotten, recorded as the policy's) and the next Recover
// escalates it. A row whose earlier outcome is not in doubt is sent at any
// age.
func TestAnOutboxResendClaimedAfterTheRemoteForgotTheKeyIsWithheld(t *testing.T) {
	remote := turnframe.Remote{Deduplicates: time.Hour}
	for _, tt := range []struct {
		name string
		// delay leaves the row Pending, due, after the window: from a row
		// made unknown at dispNow, on clock at dispNow + a minute.
		delay    func(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, row turnframe.OutboxEntry)
		withheld bool
	}{
		{"the dispatcher was down until the window passed", func(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, row turnframe.OutboxEntry) {
			polResend(t, ctx, store, clock, remote)
			clock.Add(2 * time.Hour)
		}, true},
		{"the resend was claimed and put back unsent", func(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, row turnframe.OutboxEntry) {
			is := is.New(t)
			polResend(t, ctx, store, clock, remote)
			claims, err := store.ClaimDue(ctx, clock.Now(), 16, "w3", time.Minute)
			is.NoErr(err)
			is.Equal(len(claims), 1) // the resend
			results, err := store.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxPending,
				Code: turnframe.CodeNotSent, RetryAt: clock.Now(), Now: clock.Now()}})
			is.NoErr(err)
			is.NoErr(results[0]) // put back as a sweep that was stopped does
			clock.Add(2 * time.Hour)
		}, true},
		{"the resend was answered retryable and retried after the window", func(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, row turnframe.OutboxEntry) {
			is := is.New(t)
			polResend(t, ctx, store, clock, remote)
			busy := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}}
			report, err := turnframe.NewDispatcher(store, busy, turnframe.DispatchConfig{WorkerID: "w3"},
				turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote)).RunOnce(ctx, clock.Now())
			is.NoErr(err)
			is.Equal(report.Retried, []turnframe.OutboxID{row.ID}) // sent in the window, and the remote was busy
			clock.Add(2 * time.Hour)
		}, true},
		{"a person resent it", func(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, row turnframe.OutboxEntry) {
			is := is.New(t)
			clock.Add(2 * time.Hour)
			rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now))
			is.NoErr(rec.Settle(ctx, turnframe.OutboxSubject(rtAccount, row.ID), turnframe.Decision{Verdict: turnframe.VerdictResend,
				Actor: "operator:alice", Note: "the remote says it never got it"}))
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				row := polUnknownRow(t, store, "k1", "payments")
				clock := newPolClock(dispNow.Add(time.Minute))
				tt.delay(t, ctx, store, clock, row)
				is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxPending) // due again, long after the remote forgot the key

				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2"},
					turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
				report, err := d.RunOnce(ctx, clock.Now())
				is.NoErr(err)
				if !tt.withheld {
					is.Equal(sender.count(row.ID), 1) // a person's resend is theirs to make
					is.Equal(report.Completed, []turnframe.OutboxID{row.ID})
					return
				}
				is.Equal(sender.count(row.ID), 0) // never sent blindly once the remote forgot the key
				is.Equal(report.Unknown, []turnframe.OutboxID{row.ID})
				got := dispGet(t, store, row.ID)
				is.Equal(got.Status, turnframe.OutboxOutcomeUnknown) // still unknown, for the policy
				is.Equal(got.LastCode, turnframe.CodeKeyForgotten)
				last := polLast(t, store, turnframe.OutboxSubject(rtAccount, row.ID))
				is.Equal(last.Actor, turnframe.ActorPolicy) // the policy's rule withheld it, not the remote
				is.True(last.Note != "")                    // and the trail says why

				rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
				_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
				is.NoErr(err)
				is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention) // a person decides
			})
		})
	}
}

// polResend runs one Recover on clock, which resends the unknown row to
// remote, still remembering its key.
func polResend(t *testing.T, ctx context.Context, store turnframe.Store, clock *polClock, remote turnframe.Remote) {
	t.Helper()
	is := is.New(t)
	rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
	report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
	is.NoErr(err)
	is.Equal(len(report.Policy), 1)
	is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // the remote still remembers the key
}

// Only a resend whose earlier outcome is in doubt is withheld: a row the
// remote only ever answered retryable is sent at any age, as before.
func TestAnOutboxRowNeverInDoubtIsSentAfterItsRemoteForgotTheKey(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0]
		clock := newPolClock(dispNow)
		opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", turnframe.Remote{Deduplicates: time.Hour})}
		busy := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}}
		_, err := turnframe.NewDispatcher(store, busy, turnframe.DispatchConfig{WorkerID: "w1"}, opts...).RunOnce(ctx, clock.Now())
		is.NoErr(err)
		clock.Add(2 * time.Hour) // the remote was down past the window

		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
		report, err := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2"}, opts...).RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(sender.count(row.ID), 1) // nothing of it may have landed: sending it is no blind resend
		is.Equal(report.Completed, []turnframe.OutboxID{row.ID})
	})
}

// A dispatcher that claims a lapsed resend and dies before it settles it
// leaves the row Dispatching; once the claim's lease ended, recovery
// expires it (unknown, CodeLeaseEnded) and the policy escalates it, past
// the window, never resending it.
func TestALapsedResendWhoseClaimDiedIsEscalated(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		remote := turnframe.Remote{Deduplicates: time.Hour}
		row, clock := lapsedResend(t, store, remote)
		claims, err := store.ClaimDue(ctx, clock.Now(), 16, "w3", time.Minute) // and the process dies
		is.NoErr(err)
		is.Equal(len(claims), 1)
		clock.Add(time.Minute) // the claim's lease ends

		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(report.Expired, []turnframe.OutboxID{row.ID}) // its send may have started
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyEscalated) // never resent blindly
		got := dispGet(t, store, row.ID)
		is.Equal(got.Status, turnframe.OutboxNeedsIntervention)
		is.Equal(got.LastCode, turnframe.CodeKeyForgotten)
	})
}

// lapsedResend makes a row of "payments" unknown, has the policy resend it
// while remote (a window of an hour) remembers its key, and moves the clock
// past the window: the resend a Dispatcher must withhold.
func lapsedResend(t *testing.T, store turnframe.Store, remote turnframe.Remote) (turnframe.OutboxEntry, *polClock) {
	t.Helper()
	row := polUnknownRow(t, store, "k1", "payments")
	clock := newPolClock(dispNow.Add(time.Minute))
	polResend(t, context.Background(), store, clock, remote)
	clock.Add(2 * time.Hour)
	return row, clock
}
