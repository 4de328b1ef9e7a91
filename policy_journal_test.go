package turnframe_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// polTurns is a RecoveryHandler that records which action each turn got
// and, for ResumeCommands, executes the turn through rt and h.
type polTurns struct {
	mu      sync.Mutex
	actions []turnframe.ActionKind
	rt      *turnframe.Runtime
	h       turnframe.Handler
}

func (p *polTurns) note(k turnframe.ActionKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actions = append(p.actions, k)
}

func (p *polTurns) RestartInterpretation(_ context.Context, _ turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	p.note(a.Kind)
	return nil
}

func (p *polTurns) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	p.note(a.Kind)
	_, err := p.rt.Execute(ctx, m.Account, m.Turn, p.h)
	return err
}

func (p *polTurns) RegenerateResponse(_ context.Context, _ turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	p.note(a.Kind)
	return nil
}

// polUnknownCommand plans one "charge" command (rtScript answers it
// Unknown) and executes it, leaving it OutcomeUnknown.
func polUnknownCommand(t *testing.T, store turnframe.Store, clock *polClock) turnframe.TurnID {
	t.Helper()
	rt := turnframe.New(store, turnframe.WithClock(clock.Now))
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
	if _, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript)); err != nil {
		t.Fatalf("execute: %v", err)
	}
	if e := rtEntry(t, store, "k-charge"); e.Status != turnframe.JournalOutcomeUnknown {
		t.Fatalf("entry is %v, not outcome_unknown", e.Status)
	}
	return turn
}

func TestRecoverResolvesAnUnknownCommandByWhatItsRemoteCanDo(t *testing.T) {
	cases := []struct {
		name    string
		remote  *turnframe.Remote
		outcome turnframe.PolicyOutcome
		status  turnframe.JournalStatus
		actions []turnframe.ActionKind // what the turn was finally handed
		calls   int                    // handler calls of the command, the first included
	}{
		{"AnUndeclaredCommandWaitsForSettleItsTurnAnsweredAroundIt", nil, turnframe.PolicyLeft, turnframe.JournalOutcomeUnknown,
			[]turnframe.ActionKind{turnframe.ActionRegenerateResponse}, 1},
		{"AVerifierThatFindsItCommitsItAndTheAnswerIsRegenerated", &turnframe.Remote{Verifier: polFound(turnframe.FoundHappened, "ch_9")},
			turnframe.PolicyCompleted, turnframe.JournalCommitted, []turnframe.ActionKind{turnframe.ActionRegenerateResponse}, 1},
		{"AVerifierThatFindsItNeverArrivedRunsItAgainUnderItsKey", &turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened, "")},
			turnframe.PolicyResent, turnframe.JournalCommitted, []turnframe.ActionKind{turnframe.ActionResumeCommands}, 2},
		{"ARemoteThatCanDoNeitherEscalatesItsTurnAnsweredAroundIt", &turnframe.Remote{},
			turnframe.PolicyEscalated, turnframe.JournalNeedsIntervention, []turnframe.ActionKind{turnframe.ActionRegenerateResponse}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newPolClock(dispNow)
				turn := polUnknownCommand(t, store, clock)
				clock.Add(time.Minute)
				opts := []turnframe.Option{turnframe.WithClock(clock.Now)}
				if tc.remote != nil {
					opts = append(opts, turnframe.WithCommand("charge", *tc.remote))
				}
				// The second run of "charge" commits: the remote now answers.
				h := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				handler := &polTurns{rt: turnframe.New(store, opts...), h: h}
				report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, handler)
				is.NoErr(err)
				is.Equal(len(report.Policy), 1) // the unknown command
				is.NoErr(report.Policy[0].Err)
				is.Equal(report.Policy[0].Outcome, tc.outcome)
				is.Equal(report.Policy[0].Uncertain.Turn, turn)
				is.Equal(handler.actions, tc.actions) // the turn decided again after the policy
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, tc.status)
				is.Equal(1+h.callsOf("k-charge"), tc.calls) // run again only when the remote said it never arrived
				if tc.status == turnframe.JournalNeedsIntervention {
					is.Equal(len(report.NeedsIntervention), 1) // listed for a person
					is.Equal(report.NeedsIntervention[0].Key, turnframe.IdempotencyKey("k-charge"))
				}
			})
		})
	}
}

func TestExecuteDoesNotRunADeadAttemptAgainWhenItsRemoteForbidsIt(t *testing.T) {
	cases := []struct {
		name   string
		remote *turnframe.Remote
		reran  bool
		after  time.Duration // from the take to Execute; zero: an hour
	}{
		{"Undeclared", nil, true, 0},
		{"Deduplicates", &turnframe.Remote{Deduplicates: 24 * time.Hour}, true, 0},
		{"DeduplicatesButForgotTheKey", &turnframe.Remote{Deduplicates: time.Minute}, false, 0},
		// Execute runs an hour after the admission: a key remembered for
		// exactly an hour is forgotten from that instant on.
		{"DeduplicatesButForgetsTheKeyAtThisInstant", &turnframe.Remote{Deduplicates: time.Hour}, false, 0},
		{"Verifiable", &turnframe.Remote{Verifier: polFound(turnframe.FoundUnsure, "")}, false, 0},
		// A remote that can be asked is asked first, even when it also
		// deduplicates and still remembers the key: never a blind rerun.
		{"VerifiableThatAlsoDeduplicates", &turnframe.Remote{Verifier: polFound(turnframe.FoundUnsure, ""), Deduplicates: 24 * time.Hour}, false, 0},
		{"Neither", &turnframe.Remote{}, false, 0},
		// The dead attempt's minute-long lease ends at the very instant
		// Execute reads it: it is dead from that instant on, as the store
		// judges it, so it is declared unknown, not taken over and run.
		{"NeitherWhoseLeaseEndsAtThisInstant", &turnframe.Remote{}, false, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newPolClock(dispNow)
				var opts []turnframe.Option
				if tc.remote != nil {
					opts = append(opts, turnframe.WithCommand("book", *tc.remote))
				}
				rt := turnframe.New(store, append(opts, turnframe.WithClock(clock.Now))...)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
				// An attempt takes the entry and dies before it settles.
				dead := turnframe.NewIDGenerator().AttemptID(dispNow)
				_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.Now(),
					Settle: []turnframe.Settlement{{Key: "k-book", To: turnframe.JournalExecuting, Attempt: dead, Lease: time.Minute}}})
				is.NoErr(err)
				after := tc.after
				if after == 0 {
					after = time.Hour // its lease ended long ago
				}
				clock.Add(after)

				h := rtNewHandler(rtScript)
				report, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(h.callsOf("k-book") == 1, tc.reran) // run again only where the remote allows it
				e := rtEntry(t, store, "k-book")
				if tc.reran {
					is.Equal(e.Status, turnframe.JournalCommitted)
					return
				}
				is.Equal(report.Results[0].Kind, turnframe.ResultUnknown) // declared unknown, for the policy
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown)
				is.Equal(e.Code, turnframe.CodeLeaseEnded)
				last := polLast(t, store, turnframe.JournalSubject(rtAccount, "k-book"))
				is.Equal(last.Actor, turnframe.ActorRecovery) // recorded as recovery's move
				is.Equal(last.From, "executing")
				is.Equal(last.Attempt, dead.String()) // naming the attempt that died
			})
		})
	}
}

func TestSettleResolvesAnUnknownCommandByHand(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		polUnknownCommand(t, store, clock)
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now))
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		is.NoErr(rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorOperator, Note: "card network down"}))
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention)
		err := rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "x", Actor: turnframe.ActorPolicy})
		is.True(err != nil) // the policy never moves what needs a person
		is.NoErr(rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "card.declined", Actor: "operator:bob"}))
		e := rtEntry(t, store, "k-charge")
		is.Equal(e.Status, turnframe.JournalRejected)
		is.Equal(e.Code, "card.declined")
		h, err := store.History(ctx, subject, 0, 100)
		is.NoErr(err)
		var moves []string
		for _, r := range h {
			moves = append(moves, r.From+">"+r.To+"@"+string(r.Actor))
		}
		is.Equal(moves, []string{">pending@app", "pending>executing@app", "executing>outcome_unknown@app",
			"outcome_unknown>needs_intervention@operator", "needs_intervention>rejected@operator:bob"}) // the whole trail
	})
}

func TestRecoverDeclaresADeadAttemptBehindAnEscalationUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		neither := []turnframe.Option{turnframe.WithClock(clock.Now),
			turnframe.WithCommand("charge", turnframe.Remote{}), turnframe.WithCommand("book", turnframe.Remote{})}
		rt := turnframe.New(store, neither...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"), rtCmd("k-book", "flight/7", "book"))
		ids := turnframe.NewIDGenerator()
		a1, a2 := ids.AttemptID(dispNow), ids.AttemptID(dispNow)
		take := func(key turnframe.IdempotencyKey, a turnframe.AttemptID) {
			_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.Now(),
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: a, Lease: time.Minute}}})
			is.NoErr(err)
		}
		take("k-charge", a1)
		_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.Now(),
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalOutcomeUnknown, Attempt: a1}}})
		is.NoErr(err)
		take("k-book", a2) // and its process dies
		clock.Add(time.Hour)

		report, err := turnframe.NewRecovery(store, neither...).Recover(ctx, turnframe.RecoveryScope{}, &polTurns{rt: rt, h: rtNewHandler(rtScript)})
		is.NoErr(err)
		is.Equal(len(report.Policy), 2) // the unknown, and the dead attempt beside it
		for _, p := range report.Policy {
			is.NoErr(p.Err)
			is.Equal(p.Outcome, turnframe.PolicyEscalated)
		}
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalNeedsIntervention) // not left executing behind its sibling
		is.Equal(len(report.NeedsIntervention), 2)                                       // both listed for a person
	})
}

func TestAStaleFindingNeverSettlesALaterSend(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		stale := dispGet(t, store, row.ID).Attempts
		// Another recovery resent it meanwhile, and its send is unknown too.
		is.NoErr(store.Resolve(ctx, turnframe.Resolution{ID: row.ID, Verdict: turnframe.VerdictResend, Actor: turnframe.ActorPolicy, Now: dispNow}))
		claims, err := store.ClaimDue(ctx, dispNow, 1, "w2", time.Minute)
		is.NoErr(err)
		is.NoErr(turnframe.MarkClaimUnknown(ctx, store, claims[0], "", dispNow))
		// The finding about the first send comes in now: refused.
		err = store.Resolve(ctx, turnframe.Resolution{ID: row.ID, Verdict: turnframe.VerdictResend, Actor: turnframe.ActorPolicy, Now: dispNow, Attempts: stale})
		is.True(errors.Is(err, turnframe.ErrConflict)) // fenced on the attempt it was about
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown)

		clock := newPolClock(dispNow)
		polUnknownCommand(t, store, clock)
		first := rtEntry(t, store, "k-charge")
		turn := first.Turn
		_, err = store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: dispNow, Actor: turnframe.ActorPolicy,
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalPending}}})
		is.NoErr(err)
		_, err = turnframe.New(store, turnframe.WithClock(clock.Now)).Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err) // ran again: unknown under a new attempt
		_, err = store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: dispNow, Actor: turnframe.ActorPolicy,
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalCommitted, Prior: first.Attempt}}})
		is.True(errors.Is(err, turnframe.ErrConflict)) // a finding about the first attempt does not settle the second
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown)
	})
}

// TestACommandsResendsCountEveryRerun: Remote.Resends bounds every rerun of
// a command together. Here Execute's take-over of an attempt that died is
// the one resend Resends: 1 allows; the policy used to count only its own
// resends and sent the command a third time.
func TestACommandsResendsCountEveryRerun(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clock := newStepClock(dispNow)
		opts := []turnframe.Option{
			turnframe.WithClock(clock.read),
			turnframe.WithCommand("pay", turnframe.Remote{Deduplicates: 24 * time.Hour, Resends: 1}),
		}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-pay", "booking/1", "pay"))

		var mu sync.Mutex
		calls := 0
		count := func() {
			mu.Lock()
			defer mu.Unlock()
			calls++
		}
		never := make(chan struct{})
		t.Cleanup(func() { close(never) })
		dies := func() { // a run whose process dies mid-call: Execute returns, the entry stays Executing
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
				count()
				cancel()
				<-never
				return turnframe.Reject("unreachable")
			}))
			is.True(errors.Is(err, context.Canceled))
		}
		dies()
		clock.set(dispNow.Add(time.Hour))
		dies() // taken over (attempts 1 ≤ Resends 1): the one resend allowed
		clock.set(dispNow.Add(2 * time.Hour))

		unknown := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			count()
			return turnframe.Unknown("")
		})
		_, err := rt.Execute(context.Background(), rtAccount, turn, unknown)
		is.NoErr(err)
		is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalOutcomeUnknown) // declared, not run a third time

		report, err := turnframe.NewRecovery(store, opts...).Recover(context.Background(), turnframe.RecoveryScope{}, &polTurns{rt: rt, h: unknown})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyEscalated)
		is.Equal(report.Policy[0].Code, turnframe.CodeResendsExhausted)
		is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalNeedsIntervention)
		_, err = rt.Execute(context.Background(), rtAccount, turn, unknown)
		is.NoErr(err)
		mu.Lock()
		defer mu.Unlock()
		is.Equal(calls, 2) // run once, resent once, never a third time
	})
}

// TestAStaleLookupDoesNotCountAgainstTheNextAttempt: a slow lookup of a
// row's first unknown send answers "cannot tell" only after the row was
// sent again and became unknown again. Its record names the attempt it was
// about, so the second attempt's lookups start from zero: with VerifyTries
// 1, the second attempt is looked up before it is escalated, never
// escalated unasked.
func TestAStaleLookupDoesNotCountAgainstTheNextAttempt(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments") // attempt 1 unknown
		subject := turnframe.OutboxSubject(rtAccount, row.ID)

		var mu sync.Mutex
		var asked []int // the attempt each lookup was about
		entered, release := make(chan struct{}), make(chan struct{})
		remote := turnframe.Remote{VerifyTries: 1, VerifyTimeout: time.Hour, Verifier: turnframe.VerifierFunc(func(_ context.Context, u turnframe.Uncertain) turnframe.Verification {
			mu.Lock()
			asked = append(asked, u.Attempts)
			first := len(asked) == 1
			mu.Unlock()
			if first {
				close(entered)
				<-release // a slow lookup of attempt 1
			}
			return turnframe.Verification{Found: turnframe.FoundUnsure, Note: "lookup lags"}
		})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))

		done := make(chan turnframe.RecoverReport)
		go func() {
			report, _ := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			done <- report
		}()
		<-entered
		is.NoErr(rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictResend, Actor: "operator:alice"}))
		d := turnframe.NewDispatcher(store, turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "net.reset"}
		}), turnframe.DispatchConfig{WorkerID: "w2"})
		rep, err := d.RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(len(rep.Unknown), 1)
		is.Equal(dispGet(t, store, row.ID).Attempts, 2) // attempt 2 unknown
		close(release)                                  // the lookup of attempt 1 now says it cannot tell
		<-done

		clock.Add(time.Hour)
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyEscalated) // its one try spent on attempt 2 itself
		mu.Lock()
		defer mu.Unlock()
		is.Equal(asked, []int{1, 2}) // attempt 2 was looked up before it was escalated
	})
}
