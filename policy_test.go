package turnframe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// polClock is a clock a test moves by hand.
type polClock struct {
	mu sync.Mutex
	t  time.Time
}

func newPolClock(t time.Time) *polClock { return &polClock{t: t} }

func (c *polClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *polClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// polNoTurns is a RecoveryHandler for tests that make no turn recovery
// needs: any call is a failure.
type polNoTurns struct{ t *testing.T }

func (h polNoTurns) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	h.t.Error("restart interpretation called")
	return nil
}

func (h polNoTurns) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	h.t.Error("resume commands called")
	return nil
}

func (h polNoTurns) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil // the enqueuing turns of dispEnqueue are left planned: nothing to say
}

// polUnknownRow enqueues one row to dest and leaves it OutcomeUnknown, as a
// send that got no answer would, at dispNow.
func polUnknownRow(t *testing.T, store turnframe.Store, key turnframe.IdempotencyKey, dest string) turnframe.OutboxEntry {
	t.Helper()
	ctx := context.Background()
	row := dispEnqueue(t, store, rtAccount, key, turnframe.OutboxMessage{Destination: dest, Payload: []byte("p")})[0]
	claims, err := store.ClaimDue(ctx, dispNow, 16, "w1", time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %d claims", err, len(claims))
	}
	if err := turnframe.MarkClaimUnknown(ctx, store, claims[0], "", dispNow); err != nil {
		t.Fatalf("mark unknown: %v", err)
	}
	return row
}

// polUnsure runs Recover passes on clock over a store holding one unknown
// payments row (polUnknownRow), whose remote's lookups never can tell.
type polUnsure struct {
	t     *testing.T
	store turnframe.Store
	clock *polClock
	asked int // the lookups, over every pass
}

// recoverWith runs one pass allowing tries lookups, a second's backoff
// apart, and returns the policy's outcome for the row.
func (u *polUnsure) recoverWith(tries int) turnframe.PolicyOutcome {
	u.t.Helper()
	is := is.New(u.t)
	unsure := turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		u.asked++
		return turnframe.Verification{Found: turnframe.FoundUnsure, Note: "lookup lags"}
	})
	rec := turnframe.NewRecovery(u.store, turnframe.WithClock(u.clock.Now),
		turnframe.WithDestination("payments", turnframe.Remote{Verifier: unsure, VerifyTries: tries, VerifyBackoff: time.Second}))
	report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, polNoTurns{u.t})
	is.NoErr(err)
	is.Equal(len(report.Policy), 1) // the one unknown row
	is.NoErr(report.Policy[0].Err)
	return report.Policy[0].Outcome
}

// polLast returns the last history record of subject.
func polLast(t *testing.T, store turnframe.Store, s turnframe.Subject) turnframe.HistoryRecord {
	t.Helper()
	h, err := store.History(context.Background(), s, 0, turnframe.MaxLimit)
	if err != nil || len(h) == 0 {
		t.Fatalf("history of %v: %v (%d records)", s, err, len(h))
	}
	return h[len(h)-1]
}

// polEvidence counts the evidence records of subject with code.
func polEvidence(t *testing.T, store turnframe.Store, s turnframe.Subject, code string) int {
	t.Helper()
	h, err := store.History(context.Background(), s, 0, turnframe.MaxLimit)
	if err != nil {
		t.Fatalf("history of %v: %v", s, err)
	}
	n := 0
	for _, r := range h {
		if r.Evidence && r.Code == code {
			n++
		}
	}
	return n
}

func polFound(f turnframe.Finding, ref string) turnframe.Verifier {
	return turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
		return turnframe.Verification{Found: f, RemoteRef: ref}
	})
}

func TestRecoverResolvesAnUnknownRowByWhatItsRemoteCanDo(t *testing.T) {
	cases := []struct {
		name     string
		remote   *turnframe.Remote // nil: none declared
		after    time.Duration     // how long after the send Recover runs
		kind     turnframe.RemoteKind
		outcome  turnframe.PolicyOutcome
		status   turnframe.OutboxStatus
		code     string
		ref      string
		evidence int // unsure lookups recorded
	}{
		{name: "AnUndeclaredDestinationWaitsForSettle", after: time.Minute,
			kind: turnframe.RemoteUndeclared, outcome: turnframe.PolicyLeft, status: turnframe.OutboxOutcomeUnknown, code: ""},
		{name: "ARemoteThatCanDoNeitherEscalates", remote: &turnframe.Remote{}, after: time.Minute,
			kind: turnframe.RemoteNeither, outcome: turnframe.PolicyEscalated, status: turnframe.OutboxNeedsIntervention, code: turnframe.CodeNoSafeResolution},
		{name: "ADeduplicatingRemoteThatRemembersTheKeyIsSentAgain", remote: &turnframe.Remote{Deduplicates: time.Hour}, after: time.Minute,
			kind: turnframe.RemoteDeduplicates, outcome: turnframe.PolicyResent, status: turnframe.OutboxPending, code: turnframe.CodeResent},
		{name: "ADeduplicatingRemoteThatForgotTheKeyEscalates", remote: &turnframe.Remote{Deduplicates: time.Hour}, after: time.Hour,
			kind: turnframe.RemoteDeduplicates, outcome: turnframe.PolicyEscalated, status: turnframe.OutboxNeedsIntervention, code: turnframe.CodeKeyForgotten},
		{name: "AVerifierThatFindsItCompletesIt", remote: &turnframe.Remote{Verifier: polFound(turnframe.FoundHappened, "ch_1")}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyCompleted, status: turnframe.OutboxCompleted, code: turnframe.CodeVerifiedHappened, ref: "ch_1"},
		{name: "AVerifierThatFindsItNeverArrivedSendsItAgain", remote: &turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened, "")}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyResent, status: turnframe.OutboxPending, code: turnframe.CodeVerifiedNotHappened},
		{name: "AVerifierThatCannotTellIsAskedAgainLater", remote: &turnframe.Remote{Verifier: polFound(turnframe.FoundUnsure, ""), Deduplicates: time.Hour}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyUnsure, status: turnframe.OutboxOutcomeUnknown, code: "", evidence: 1},
		{name: "ASettleDelayPutsTheFirstLookupOff", remote: &turnframe.Remote{Verifier: polFound(turnframe.FoundHappened, ""), SettleDelay: time.Hour}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyWaiting, status: turnframe.OutboxOutcomeUnknown},
		{name: "AVerifierThatPanicsIsOneMoreUnsureLookup", remote: &turnframe.Remote{Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
			panic("verifier bug")
		})}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyUnsure, status: turnframe.OutboxOutcomeUnknown, evidence: 1},
		{name: "AFindingOutOfRangeIsOneMoreUnsureLookup", remote: &turnframe.Remote{Verifier: polFound(turnframe.Finding(9), "")}, after: time.Minute,
			kind: turnframe.RemoteVerifiable, outcome: turnframe.PolicyUnsure, status: turnframe.OutboxOutcomeUnknown, evidence: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				row := polUnknownRow(t, store, "k1", "payments")
				clock := newPolClock(dispNow.Add(tc.after))
				opts := []turnframe.Option{turnframe.WithClock(clock.Now)}
				if tc.remote != nil {
					opts = append(opts, turnframe.WithDestination("payments", *tc.remote))
				}
				report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
				is.NoErr(err)
				is.Equal(len(report.Policy), 1) // the one unknown row
				got := report.Policy[0]
				is.NoErr(got.Err)
				is.Equal(got.Kind, tc.kind)       // the remote's kind
				is.Equal(got.Outcome, tc.outcome) // what the policy did
				rec := dispGet(t, store, row.ID)
				is.Equal(rec.Status, tc.status) // the row's status
				if tc.code != "" {
					is.Equal(rec.LastCode, tc.code) // the policy's code
					last := polLast(t, store, turnframe.OutboxSubject(rtAccount, row.ID))
					is.Equal(last.Actor, turnframe.ActorPolicy) // the move is the policy's, in the audit trail
					is.Equal(last.From, "outcome_unknown")
					is.Equal(last.To, tc.status.String())
				}
				is.Equal(rec.RemoteRef, tc.ref)                                                                                      // the verifier's reference
				is.Equal(polEvidence(t, store, turnframe.OutboxSubject(rtAccount, row.ID), turnframe.CodeVerifyUnsure), tc.evidence) // unsure lookups recorded
				is.Equal(len(report.NeedsIntervention), map[bool]int{true: 1, false: 0}[tc.status == turnframe.OutboxNeedsIntervention])
			})
		})
	}
}

func TestRecoverEscalatesAfterTheLastLookupThatCannotTell(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		subject := turnframe.OutboxSubject(rtAccount, row.ID)
		var asked int
		remote := turnframe.Remote{VerifyTries: 3, VerifyBackoff: time.Second,
			Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
				asked++
				return turnframe.Verification{Found: turnframe.FoundUnsure, Note: "lookup lags"}
			})}
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		recover := func() turnframe.PolicyOutcome {
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			is.NoErr(err)
			is.Equal(len(report.Policy), 1)
			return report.Policy[0].Outcome
		}
		is.Equal(recover(), turnframe.PolicyUnsure)  // first lookup
		is.Equal(recover(), turnframe.PolicyWaiting) // the backoff runs: not asked again
		is.Equal(asked, 1)
		clock.Add(time.Second)
		is.Equal(recover(), turnframe.PolicyUnsure) // second lookup, after 1 s
		clock.Add(time.Second)
		is.Equal(recover(), turnframe.PolicyWaiting) // the backoff doubled to 2 s
		clock.Add(time.Second)
		is.Equal(recover(), turnframe.PolicyEscalated) // the third and last lookup could not tell either
		is.Equal(asked, 3)
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention)
		is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeVerifyExhausted)
		is.Equal(polEvidence(t, store, subject, turnframe.CodeVerifyUnsure), 3) // every lookup is evidence
		clock.Add(time.Hour)
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 0)            // a row needing intervention is not the policy's
		is.Equal(len(report.NeedsIntervention), 1) // but it is listed
		is.Equal(asked, 3)                         // and never asked again
	})
}

func TestRecoverResendsToADeduplicatingRemoteAtMostResendsTimes(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		clock := newPolClock(dispNow.Add(time.Minute))
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now),
			turnframe.WithDestination("payments", turnframe.Remote{Deduplicates: 24 * time.Hour, Resends: 2}))
		var sends int
		d := turnframe.NewDispatcher(store, turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			sends++
			return turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "net.reset"}
		}), turnframe.DispatchConfig{WorkerID: "w2"})
		for round := 1; round <= 3; round++ {
			report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
			is.NoErr(err)
			want := turnframe.PolicyResent
			if round == 3 {
				want = turnframe.PolicyEscalated
			}
			is.Equal(report.Policy[0].Outcome, want) // resent twice, then escalated
			if round < 3 {
				_, err := d.RunOnce(ctx, clock.Now())
				is.NoErr(err)
			}
		}
		is.Equal(sends, 2) // never a third blind send
		is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeResendsExhausted)
	})
}

func TestRecoverExpiresADeadClaimAndHandsItToThePolicy(t *testing.T) {
	cases := []struct {
		name   string
		remote *turnframe.Remote
		status turnframe.OutboxStatus
		code   string
	}{
		{"AnUndeclaredDestinationIsSentAgainAtLeastOnce", nil, turnframe.OutboxPending, turnframe.CodeUndeclaredResend},
		{"ARemoteThatCanDoNeitherIsNeverSentAgain", &turnframe.Remote{}, turnframe.OutboxNeedsIntervention, turnframe.CodeNoSafeResolution},
		{"ADeduplicatingRemoteIsSentAgain", &turnframe.Remote{Deduplicates: time.Hour}, turnframe.OutboxPending, turnframe.CodeResent},
		{"AVerifiableRemoteIsAskedFirst", &turnframe.Remote{Verifier: polFound(turnframe.FoundHappened, "r9")}, turnframe.OutboxCompleted, turnframe.CodeVerifiedHappened},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
				claims, err := store.ClaimDue(ctx, dispNow, 1, "dead-worker", time.Minute)
				is.NoErr(err)
				is.Equal(len(claims), 1)
				opts := []turnframe.Option{turnframe.WithClock(func() time.Time { return claims[0].LeaseUntil })}
				if tc.remote != nil {
					opts = append(opts, turnframe.WithDestination("payments", *tc.remote))
				}
				report, err := turnframe.NewRecovery(store, opts...).Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
				is.NoErr(err)
				is.Equal(report.Expired, []turnframe.OutboxID{row.ID}) // the claim whose lease ended
				rec := dispGet(t, store, row.ID)
				is.Equal(rec.Status, tc.status)
				is.Equal(rec.LastCode, tc.code)
				h, err := store.History(ctx, turnframe.OutboxSubject(rtAccount, row.ID), 0, 100)
				is.NoErr(err)
				var moves []string
				for _, r := range h {
					moves = append(moves, r.From+">"+r.To+"@"+string(r.Actor))
				}
				is.Equal(moves, []string{
					">pending@app",
					"pending>dispatching@worker:dead-worker",
					"dispatching>outcome_unknown@recovery",
					"outcome_unknown>" + tc.status.String() + "@policy",
				}) // every move, with who made it
			})
		})
	}
}

func TestNeedsInterventionIsSettledOnlyByTheAppOrAPerson(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		subject := turnframe.OutboxSubject(rtAccount, row.ID)
		rec := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return dispNow.Add(time.Minute) }),
			turnframe.WithDestination("payments", turnframe.Remote{}))
		_, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention)
		for _, actor := range []turnframe.Actor{turnframe.ActorPolicy, turnframe.ActorRecovery, turnframe.WorkerActor("w1")} {
			err := rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: actor})
			is.True(errors.Is(err, turnframe.ErrInvalid)) // not turnframe's own to settle: Settle takes none of them
			err = store.Resolve(ctx, turnframe.Resolution{ID: row.ID, Verdict: turnframe.VerdictCompleted, Actor: actor, Now: dispNow.Add(time.Minute)})
			is.True(errors.Is(err, turnframe.ErrConflict)) // nor does the store move it for them
		}
		err = rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorOperator})
		is.True(errors.Is(err, turnframe.ErrConflict)) // already escalated
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxNeedsIntervention)
		is.NoErr(rec.Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted, RemoteRef: "seen-in-dashboard",
			Actor: "operator:alice", Note: "found it in the payments dashboard"}))
		got := dispGet(t, store, row.ID)
		is.Equal(got.Status, turnframe.OutboxCompleted)
		is.Equal(got.RemoteRef, "seen-in-dashboard")
		last := polLast(t, store, subject)
		is.Equal(last.Actor, turnframe.Actor("operator:alice"))
		is.Equal(last.Note, "found it in the payments dashboard")
	})
}

// TestSettleOfAnotherTenantsRowIsNotFound: another tenant's row reads as a
// missing one, by kind and word for word, or an account could learn which
// row ids exist for others.
func TestSettleOfAnotherTenantsRowIsNotFound(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		missing := turnframe.NewIDGenerator().OutboxID(dispNow)
		rec := turnframe.NewRecovery(store)
		d := turnframe.Decision{Verdict: turnframe.VerdictCompleted}
		errOther := rec.Settle(ctx, turnframe.OutboxSubject(rtOther, row.ID), d)
		errMissing := rec.Settle(ctx, turnframe.OutboxSubject(rtOther, missing), d)
		is.True(errors.Is(errOther, turnframe.ErrNotFound)) // another tenant's row reads as absent
		is.True(errors.Is(errMissing, turnframe.ErrNotFound))
		is.Equal(strings.ReplaceAll(errOther.Error(), row.ID.String(), "ID"),
			strings.ReplaceAll(errMissing.Error(), missing.String(), "ID")) // the same words
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown)
	})
}
