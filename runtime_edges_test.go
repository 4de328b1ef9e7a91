package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Tests for runtime rules a mutation run of the runtime's flows found that
// no test noticed.

// An abandoned turn runs nothing, a local command included: Execute
// refuses the turn up front (ErrConflict) and never calls the handler. A
// local command has no take for the store to refuse, so without that
// refusal its handler would run on the abandoned turn.
func TestExecuteOfAnAbandonedTurnCallsNoHandlerOfALocalCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithLocalCommand("book"), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user_left"))
		h := rtNewHandler(rtScript)
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(errors.Is(err, turnframe.ErrConflict))                         // refused: the turn is abandoned
		is.Equal(h.callsOf("k-book"), 0)                                       // the handler never ran
		is.Equal(report.Phase, turnframe.PhaseAbandoned)                       // reported as it is
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalPending) // left for a turn that adopts it
	})
}

// A commit that finds its case moved runs the handler again, and renews
// the attempt's lease first — even when the lease would still cover the
// call — so the lease (and the turn's update time) count from the re-run.
func TestARerunAfterACaseMovedRenewsTheLease(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		const timeout, margin = time.Minute, 30 * time.Second
		clock := newStepClock(dispNow)
		rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(timeout), turnframe.WithLeaseMargin(margin))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		other := rtPlanned(t, rt, rtAccount, rtCmd("k-bump", "flight/7", "bump"))
		var leases []time.Time
		h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
			leases = append(leases, rtEntry(t, store, call.Command.Key).LeaseUntil)
			if len(leases) == 1 { // the case moves under the first call, which takes 10 s
				_, err := rt.Execute(ctx, rtAccount, other, rtNewHandler(rtScript))
				is.NoErr(err) // the other turn commits on the same case
				clock.set(dispNow.Add(10 * time.Second))
			}
			return rtScript(ctx, call, 1)
		})
		report, err := rt.Execute(context.Background(), rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)    // landed on the re-run
		is.Equal(len(leases), 2)                                       // run again once
		is.True(!leases[0].Before(dispNow.Add(timeout + margin)))      // the take's lease
		is.True(!leases[1].Before(clock.read().Add(timeout + margin))) // renewed at the re-run, not the take's
	})
}

// rtRefusedCommit is a store that refuses every commit of an entry with
// ErrConflict, writing nothing, as a store refuses a transition: the case
// did not move.
type rtRefusedCommit struct {
	turnframe.Store
}

func (s *rtRefusedCommit) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalCommitted {
		return turnframe.Applied{}, turnframe.ErrConflict
	}
	return s.Store.Apply(ctx, w)
}

// A commit refused with ErrConflict while its case did not move is not a
// reason to run the handler again: only a case that moved is. Execute
// stops with the conflict after one call, the entry left Executing.
func TestACommitRefusedWithItsCaseUnmovedDoesNotRunTheHandlerAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(&rtRefusedCommit{Store: store}, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		h := rtNewHandler(rtScript)
		_, err := rt.Execute(context.Background(), rtAccount, turn, h)
		is.True(errors.Is(err, turnframe.ErrConflict))                           // the refusal
		is.Equal(h.callsOf("k-book"), 1)                                         // called once, not re-run
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // nothing written
	})
}

// rtDetachedApply is a store whose Apply does not honour a cancelled
// context: it writes anyway.
type rtDetachedApply struct {
	turnframe.Store
}

func (s *rtDetachedApply) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	return s.Store.Apply(context.WithoutCancel(ctx), w)
}

// A caller that cancels its context while the handler runs gets its
// context's error, and the entry stays Executing under its lease, to be
// taken over later: the cancel is not the command's timeout, so no
// OutcomeUnknown is written — whether or not the store would still write.
func TestACancelledCallerIsNotRecordedAsAnUnknownOutcome(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &recorder{}
		rt := turnframe.New(&rtDetachedApply{Store: store}, turnframe.WithObserver(rec), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		var once sync.Once
		h := rtNewHandler(func(hctx context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			once.Do(cancel) // the caller gives up while the command runs
			<-hctx.Done()
			return turnframe.Unknown("")
		})
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(errors.Is(err, context.Canceled))                                // the caller's error
		is.Equal(report.Results[0].Kind, turnframe.ResultPending)                // not an outcome
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // left Executing, not OutcomeUnknown
		is.Equal(rec.count(turnframe.SignalExternalOutcomeUnknown), 0)           // no unknown counted
	})
}

// rtCancelAfterClaim is a store that ends the caller's context right after
// a claim returned rows, as an application shutting down between the claim
// and the sends.
type rtCancelAfterClaim struct {
	turnframe.Store
	cancel context.CancelFunc
}

func (s *rtCancelAfterClaim) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	s.cancel()
	return claims, err
}

// A sweep whose context ended before a row's send started sends nothing,
// also when the row's destination is limited and has a place free: the
// place and the end of the context are both ready, and the end wins. Each
// row is a coin toss for a sweep that lets either win.
func TestALimitedDestinationWithRoomSendsNothingOnceTheContextEnded(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(16, "slow", "")...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
	cfg := runConfig()
	cfg.Concurrency, cfg.BatchSize = 1, 16
	cfg.DestinationLimits = map[string]int{"slow": 4} // always room: one send at a time
	d := turnframe.NewDispatcher(&rtCancelAfterClaim{Store: store, cancel: cancel}, sender, cfg)
	report, err := d.RunOnce(ctx, dispNow)
	is.NoErr(err)
	is.Equal(len(report.Retried), len(rows)) // every row put back
	for _, r := range rows {
		is.Equal(sender.count(r.ID), 0)                                   // never sent
		is.Equal(dispGet(t, store, r.ID).LastCode, turnframe.CodeNotSent) // saying why
	}
}

// A local command whose entry was settled elsewhere and put back to
// Pending (a reconciliation's resend) while its handler ran: the store
// refuses its settlement, and Execute reports the entry ResultPending, as
// it now is, and stops there without an error — never an error about a
// case that did not move, never a re-run under the attempt it saw first.
func TestALocalCommandPutBackToPendingWhileItRanIsReportedPending(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		rt := turnframe.New(store, turnframe.WithLocalCommand("book"), quiet)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-bump", "flight/8", "bump"))
		finish := rtHeld(t, rt, turn, "k-book", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
		// Meanwhile another Execute runs it to an unknown, and it is resent.
		other, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Unknown("")
		}))
		is.NoErr(err)
		is.Equal(other.Results[0].Kind, turnframe.ResultUnknown) // the other run's outcome
		is.NoErr(turnframe.NewRecovery(store, quiet).Settle(ctx, turnframe.JournalSubject(rtAccount, "k-book"), turnframe.Decision{Verdict: turnframe.VerdictResend}))
		resent := rtEntry(t, store, "k-book")
		is.Equal(resent.Status, turnframe.JournalPending) // pending again, under the other run's attempt

		report, err := finish()
		is.NoErr(err)                                                    // not an error
		is.Equal(report.Results[0].Kind, turnframe.ResultPending)        // reported as it is
		is.Equal(report.Results[0].Attempt, resent.Attempt)              // under the attempt it is at
		is.True(report.Results[0].Ran)                                   // its handler ran, its answer thrown away
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0) // nothing of it written
	})
}

// A local command's entry taken by a runtime without the declaration while
// the local handler ran is in flight there: the refused settlement reports
// it ResultInFlight (not merely pending), and Execute stops at it.
func TestALocalCommandTakenElsewhereWhileItRanIsReportedInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		local := turnframe.New(store, turnframe.WithLocalCommand("book"), quiet)
		turn := rtPlanned(t, local, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finishLocal := rtHeld(t, local, turn, "k-book", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
		finishTaken := rtHeld(t, turnframe.New(store, quiet), turn, "k-book", turnframe.Reject("taken"))
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // taken elsewhere, its handler running

		report, err := finishLocal()
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // in flight elsewhere
		is.True(report.Results[0].Ran)                             // its own answer thrown away
		_, err = finishTaken()
		is.NoErr(err)
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalRejected) // the holder's outcome lands
	})
}

// When Run's context ends, a row it claimed whose send had not started —
// here, one waiting for its destination's place — is not sent: it goes back
// Pending with CodeNotSent. The grace period is for the sends in flight
// only, so the place the first send frees within it starts nothing.
func TestRunSendsNoRowWaitingForItsDestinationOnceItsContextEnds(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(2, "slow", "")...)
	sender := newDestCounter()
	cfg := runConfig()
	cfg.Concurrency, cfg.BatchSize, cfg.GracePeriod = 2, 2, time.Hour
	cfg.DestinationLimits = map[string]int{"slow": 1}
	d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(func() time.Time { return dispNow }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	await(t, sender.started, "the first send") // the second row waits for "slow"
	cancel()
	close(sender.proceed) // the first send answers within the grace period
	is.NoErr(await(t, done, "Run returns"))
	is.Equal(len(sender.started), 0) // the waiting row never started
	var completed, notSent int
	for _, r := range rows {
		switch rec := dispGet(t, store, r.ID); {
		case rec.Status == turnframe.OutboxCompleted:
			completed++
		case rec.Status == turnframe.OutboxPending && rec.LastCode == turnframe.CodeNotSent:
			notSent++
		}
	}
	is.Equal(completed, 1) // the send in flight settled with its answer
	is.Equal(notSent, 1)   // the waiting row put back, not sent
	noneLeft(t)
}

// rtExtendSpy is a store that, once a settlement landed, hands the rows of
// every lease extension asked of it on extended.
type rtExtendSpy struct {
	turnframe.Store
	settled  atomic.Bool
	extended chan []turnframe.OutboxID
}

func (s *rtExtendSpy) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	results, err := s.Store.Settle(ctx, settlements)
	if err == nil {
		s.settled.Store(true)
	}
	return results, err
}

func (s *rtExtendSpy) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if s.settled.Load() {
		var ids []turnframe.OutboxID
		for _, c := range claims {
			ids = append(ids, c.ID)
		}
		select {
		case s.extended <- ids:
		default:
		}
	}
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

// A row the sweep settled is out of the lease keeper's care: its lease is
// never extended again (the store would answer that its claim is lost, and
// the sweep would log that it may be sent twice), while the rows still in
// flight are.
func TestTheLeaseKeeperLeavesASettledRowAlone(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, "acme", "k1", dispMessages(2, "payments", "")...)
		store := &rtExtendSpy{Store: inner, extended: make(chan []turnframe.OutboxID, 1)}
		proceed := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(proceed) }) })
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			if e.ID == rows[1].ID {
				<-proceed // the second send is slow
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency, cfg.SendTimeout, cfg.LeaseMargin = 2, time.Hour, 2*time.Millisecond
		var log dispLog
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(dispLogger(&log)))
		done := runOnceAsync(t, d, context.Background(), dispNow)
		ids := await(t, store.extended, "an extension after the first settlement")
		once.Do(func() { close(proceed) })
		report := await(t, done, "RunOnce returns")
		is.Equal(ids, []turnframe.OutboxID{rows[1].ID})            // only the row in flight is extended
		is.Equal(len(report.Completed), 2)                         // both settled
		is.True(!strings.Contains(log.String(), "lost its claim")) // no false alarm
	})
}

// A sweep whose caller's context ended stops extending leases, so the
// settler's tries of a busy store are bounded by the leases as they stood:
// RunOnce gives the row up (Unsettled) once they ended, instead of trying
// for ever under leases its own keeper kept moving.
func TestABusyStoreIsGivenUpOnceTheContextEndedAndTheKeeperStopped(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		// The clock stands still until the store refuses a write, and each
		// refusal moves it on half an hour. On the real clock a lease of
		// 52 ms sometimes ended on a loaded machine before the send began: the
		// row was not sent, nothing cancelled the context, and the settler
		// tried for ever under leases its live keeper kept moving.
		clock := newStepClock(dispNow)
		store := &busyStore{Store: inner, onCall: func(int64) { clock.set(clock.read().Add(30 * time.Minute)) }}
		store.busy.Store(-1) // busy for good; lease extensions still land
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			cancel() // the application shuts down while the send runs
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		// Leases of an hour, extended every millisecond while the keeper
		// runs: a keeper that went on after the context ended would keep the
		// lease ahead of the clock, and the row would never be given up.
		cfg.SendTimeout, cfg.LeaseMargin = time.Hour, 2*time.Millisecond
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(slog.New(slog.DiscardHandler)), turnframe.WithClock(clock.read))
		done := runOnceAsync(t, d, ctx, dispNow)
		report := await(t, done, "RunOnce gives the busy store up")
		is.Equal(report.Unsettled, []turnframe.OutboxID{rows[0].ID}) // given up once the leases ended
	})
}

// A Recover scoped to stale turns (as Recovery.Run's later passes are)
// lists what it escalated itself: the escalation touched the turn, which a
// stale-only listing would leave out, so the intervention list is read
// across the account whatever the sweep's scope.
func TestAStaleScopedRecoverListsWhatItEscalated(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return dispNow }), quiet)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript)) // unknown
		is.NoErr(err)
		rec := turnframe.NewRecovery(store, quiet, turnframe.WithClock(func() time.Time { return dispNow.Add(time.Hour) }),
			turnframe.WithCommand("charge", turnframe.Remote{})) // can do neither: escalated at once
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{UpdatedBefore: dispNow.Add(time.Minute)}, &recHandler{})
		is.NoErr(err)
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		is.Equal(policyFor(t, report, subject).Outcome, turnframe.PolicyEscalated) // escalated by this pass
		var listed []turnframe.Subject
		for _, u := range report.NeedsIntervention {
			listed = append(listed, u.Subject)
		}
		is.Equal(listed, []turnframe.Subject{subject}) // and listed as needing a person
	})
}

// A lookup is about the attempt whose outcome was unknown when it began. If
// the command was resent and ran again meanwhile, to a new unknown, the
// finding about the old attempt settles nothing: the policy's write is
// refused (ErrConflict) and the new attempt's outcome stays unknown, for
// its own lookup.
func TestALookupAboutOneAttemptNeverSettlesTheNext(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		rt := turnframe.New(store, quiet)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript)) // unknown, first attempt
		is.NoErr(err)
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		first := rtEntry(t, store, "k-charge").Attempt

		asked, proceed := make(chan turnframe.Uncertain, 1), make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(proceed) }) })
		verifier := turnframe.VerifierFunc(func(_ context.Context, u turnframe.Uncertain) turnframe.Verification {
			asked <- u
			<-proceed
			return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ref-first"}
		})
		rec := turnframe.NewRecovery(store, quiet, turnframe.WithCommand("charge", turnframe.Remote{Verifier: verifier, VerifyTimeout: time.Hour}))
		done := make(chan turnframe.RecoverReport, 1)
		go func() {
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
			if err != nil {
				t.Errorf("recover: %v", err)
			}
			done <- report
		}()
		is.Equal(await(t, asked, "the lookup").Attempt, first) // about the first attempt

		// Meanwhile a person resends it, and it runs to a new unknown.
		is.NoErr(turnframe.NewRecovery(store, quiet).Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictResend}))
		_, err = rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)
		second := rtEntry(t, store, "k-charge")
		is.True(second.Attempt != first) // a new attempt, unknown too

		once.Do(func() { close(proceed) }) // the first attempt's lookup: it happened
		report := await(t, done, "Recover returns")
		is.True(errors.Is(policyFor(t, report, subject).Err, turnframe.ErrConflict)) // the finding is refused
		now := rtEntry(t, store, "k-charge")
		is.Equal(now.Status, turnframe.JournalOutcomeUnknown) // the new attempt stays unknown
		is.Equal(now.Attempt, second.Attempt)
	})
}

// rtExpireSpy is a store that reports each ExpireClaims call on expiring,
// once it returned.
type rtExpireSpy struct {
	turnframe.Store
	expiring chan struct{}
}

func (s *rtExpireSpy) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	ids, err := s.Store.ExpireClaims(ctx, now)
	select {
	case s.expiring <- struct{}{}:
	default:
	}
	return ids, err
}

// Run releases ended claims at every poll, not only at its start: a claim
// whose lease ends while Run runs is expired by a later release, and its
// row (its destination has no Remote) is sent again.
func TestRunReleasesAClaimWhoseLeaseEndsWhileItRuns(t *testing.T) {
	is := is.New(t)
	inner := memstoreFor(t)
	rows := dispEnqueue(t, inner, "acme", "k1", dispMessages(1, "payments", "")...)
	_, err := inner.ClaimDue(context.Background(), dispNow, 1, "dying-worker", time.Minute)
	is.NoErr(err) // a claim whose lease still runs when Run starts
	store := &rtExpireSpy{Store: inner, expiring: make(chan struct{}, 1)}
	gate := newSendGate()
	close(gate.proceed)
	clock := newStepClock(dispNow)
	cfg := runConfig()
	cfg.PollInterval = time.Millisecond
	d := turnframe.NewDispatcher(store, gate, cfg, turnframe.WithClock(clock.read), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	stop := runDispatcher(t, d)
	await(t, store.expiring, "the release at start") // nothing ended yet
	clock.set(dispNow.Add(time.Hour))                // the worker died: its lease ends
	is.Equal(await(t, gate.started, "the row sent again").ID, rows[0].ID)
	is.NoErr(stop())
}

// Recovery.Run's later passes leave alone the turns updated within
// StaleAfter: a turn in flight is handed to the handler by the first pass
// (a zero scope, at start-up) and by no later one.
func TestRecoveryRunsLaterPassesLeaveTurnsInFlightAlone(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return dispNow }))
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book")) // pending, updated at dispNow
	r := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return dispNow.Add(10 * time.Second) }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	passes := 0
	h := &recHandler{}
	loop := turnframe.RecoveryLoop{Handler: h, Interval: time.Millisecond, StaleAfter: time.Minute,
		Report: func(_ turnframe.RecoverReport, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			if passes++; passes == 3 {
				cancel() // three passes seen
			}
		}}
	is.NoErr(r.Run(ctx, loop))
	is.Equal(passes, 3)
	is.Equal(h.calls[turnframe.ActionResumeCommands], []turnframe.TurnID{turn}) // the first pass only
}

// A destination's limit is exact: with two places and a third row ready to
// go, the third waits — it is seen blocked waiting for a place before the
// first two answer — and no more than two sends to it are ever in flight.
func TestADestinationLimitAdmitsNoSendBeyondIt(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(3, "slow", "")...)
	sender := newDestCounter()
	cfg := runConfig()
	cfg.Concurrency, cfg.BatchSize = 3, 3
	cfg.DestinationLimits = map[string]int{"slow": 2}
	d := turnframe.NewDispatcher(store, sender, cfg)
	done := runOnceAsync(t, d, context.Background(), dispNow)
	await(t, sender.started, "a first send")
	await(t, sender.started, "a second send")
	waiting := func() bool { // a goroutine of the sweep blocked waiting for a place
		buf := make([]byte, 1<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "turnframe.destLimits.acquire") {
				return true
			}
		}
		return false
	}
	eventually(t, "the third row waits for a place, or starts", func() bool { return len(sender.started) > 0 || waiting() })
	is.Equal(sender.mostAtOnce("slow"), 2) // the third did not start beside the two
	close(sender.proceed)
	report := await(t, done, "RunOnce returns")
	is.Equal(len(report.Completed), len(rows)) // all three sent in the end
	is.Equal(sender.mostAtOnce("slow"), 2)     // never more than two at once
}

// rtLapseSpy is a store that checks every lease extension asked of it
// against the lease the row held: one asked at or after that lease ended
// came too late (a release could have taken the row meanwhile).
type rtLapseSpy struct {
	turnframe.Store
	mu         sync.Mutex
	extensions int
	lapsed     []time.Duration // by how much each late extension came late
	until      map[turnframe.OutboxID]time.Time
}

func (s *rtLapseSpy) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.mu.Lock()
	for _, c := range claims {
		held, ok := s.until[c.ID]
		if !ok {
			held = c.LeaseUntil
		}
		if !now.Before(held) {
			s.lapsed = append(s.lapsed, now.Sub(held))
		}
		s.until[c.ID] = now.Add(lease)
		s.extensions++
	}
	s.mu.Unlock()
	return s.Store.ExtendClaims(ctx, claims, now, lease)
}

// While a sweep runs — here its settler tries a busy store again for over
// five seconds — the keeper extends a row's lease before it ends, every half
// lease margin: with a lease of the send timeout and the margin, the lease
// never lapses even when the send timeout is short. The sweep runs in a
// synctest bubble: its clock, its keeper's ticks and its settler's backoff
// are the bubble's, which moves only when every goroutine in it waits, so
// whether a lease lapsed is decided by the keeper's schedule, never by how
// long a loaded machine took to run it (the real clock made the test
// assert a duration: a stall of 1.1 s let a lease lapse).
func TestTheLeaseKeeperExtendsALeaseBeforeItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := is.New(t)
		inner := memstoreFor(t)
		rows := dispEnqueue(t, inner, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		busy := &busyStore{Store: inner}
		busy.busy.Store(11) // refused for 10+20+…+640 ms, then 1 s four times: 5.27 s
		spy := &rtLapseSpy{Store: busy, until: make(map[turnframe.OutboxID]time.Time)}
		cfg := turnframe.DefaultDispatchConfig("w1")
		// Leases of 2.1 s, extended every second: a keeper that ticked twice
		// a lease margin apart (every 4 s) would let them lapse.
		cfg.SendTimeout, cfg.LeaseMargin = 100*time.Millisecond, 2*time.Second
		d := turnframe.NewDispatcher(spy, &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}, cfg,
			turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // settled once the store let it
		spy.mu.Lock()
		defer spy.mu.Unlock()
		t.Logf("%d extensions, %d late", spy.extensions, len(spy.lapsed))
		is.True(spy.extensions > 0)  // the keeper extended the lease while the settler waited
		is.Equal(len(spy.lapsed), 0) // always before it ended
	})
}
