package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

func outboxTests() []test {
	return []test{
		{"ACommitEnqueuesItsRowsPendingUnderTheCommandsKey", testEnqueue},
		{"NotBeforeKeepsARowFromBeingDueUntilThen", testNotBefore},
		{"ClaimTakesDueRowsByDueTimeThenEnqueueOrderUpToLimit", testClaimOrder},
		{"ClaimMarksTheRowDispatchingUnderTheWorkerLeasedUntilNowPlusTheLease", testClaimFields},
		{"ClaimsAreExclusiveUnderConcurrentClaimers", testClaimsExclusive},
		{"OutboxRowMakesEveryDocumentedMove", testRowAllowed},
		{"OutboxRowRefusesEveryOtherMoveAndChangesNothing", testRowRefused},
		{"SettleWithALostClaimIsClaimLostAndChangesNothing", testLostClaim},
		{"ASettleBatchWhereOneClaimIsLostSettlesTheOthers", testSettleBatch},
		{"AClaimSettledTwiceInOneBatchLandsOnceAndLosesTheSecondTime", testSettleTwiceInOneBatch},
		{"EachSettlementOfABatchIsRecordedWithItsOwnNote", testSettleBatchNotes},
		{"AnUnknownRowIsNeverClaimedAgainUntilResolved", testUnknownNotClaimed},
		{"SettleKeepsTheSendersCodeAsLastCodeForEveryStatus", testSettleCode},
		{"ACompletedRowShowsTheCompletionsCodeNotAnEarlierFailure", testCompletedCode},
		{"RequeueGivesAFreshAttemptBudgetWhileAttemptsKeepRising", testRequeueBudget},
		{"AClaimPutBackUnsentSpendsNoneOfTheBudgetWhileAttemptsKeepRising", testNotSentBudget},
		{"PruneRemovesOnlyRowsFinishedBeforeTheCutoff", testPrune},
		{"PruneDeletesEveryRowOfMoreThanOneBatchWithItsHistoryAndCountsThemAll", testPruneBatches},
		{"PruneNeverForgetsAJournalKey", testPruneKeepsKeys},
		{"ListOutboxFiltersByStatusAndAccountOldestFirst", testListOutbox},
		{"OutboxRowsThatDoNotExistAreNotFoundAndHoldNoClaim", testOutboxMissing},
		{"ARowsTraceContextIsReadBackByEveryReadAndClaimAndNoneStaysEmpty", testTraceContext},
	}
}

const worker = "worker-1"

// allVerdicts are the verdicts that settle something.
var allVerdicts = []turnframe.Verdict{turnframe.VerdictCompleted, turnframe.VerdictFailed, turnframe.VerdictResend, turnframe.VerdictEscalate}

// settleKind is one of the four ways a claim is settled.
type settleKind struct {
	name string
	to   turnframe.OutboxStatus
}

var settleKinds = []settleKind{
	{"complete", turnframe.OutboxCompleted},
	{"retry", turnframe.OutboxPending},
	{"fail", turnframe.OutboxFailed},
	{"unknown", turnframe.OutboxOutcomeUnknown},
}

// settleClaim settles c the way k says, through the store's method for it.
func (e *env) settleClaim(k settleKind, c turnframe.Claim, now time.Time) error {
	switch k.to {
	case turnframe.OutboxCompleted:
		return turnframe.CompleteClaim(e.ctx, e.s, c, "ref-"+k.name, now)
	case turnframe.OutboxPending:
		return turnframe.RetryClaim(e.ctx, e.s, c, "busy", now)
	case turnframe.OutboxFailed:
		return turnframe.FailClaim(e.ctx, e.s, c, "declined", now)
	default:
		return turnframe.MarkClaimUnknown(e.ctx, e.s, c, "ref-"+k.name, now)
	}
}

// must fails the test if err is not nil.
func (e *env) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// refusedOp runs op, expects an error wrapping want, and checks that the
// store did not change.
func (e *env) refusedOp(what string, want error, op func() error) {
	e.t.Helper()
	before := e.snapshot()
	if err := op(); !errors.Is(err, want) {
		e.t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	e.unchanged(before, what)
}

// rowIn enqueues one row at at(0) and moves it to status: claimed at at(1s)
// and settled at at(2s) when status needs it. claim is the last claim made
// on the row (zero for a row never claimed). A Pending row with a claim was
// retried, due again at at(2s). A NeedsIntervention row was marked unknown
// with the reference "ref", then escalated by the policy.
func (e *env) rowIn(status turnframe.OutboxStatus, claimed bool) (turnframe.OutboxEntry, turnframe.Claim) {
	e.t.Helper()
	r := e.enqueue(acme, at(0), message(""))[0]
	if status == turnframe.OutboxPending && !claimed {
		return r, turnframe.Claim{}
	}
	c := e.claimOne(at(time.Second), worker)
	switch status {
	case turnframe.OutboxPending:
		e.must(turnframe.RetryClaim(e.ctx, e.s, c, "busy", at(2*time.Second)), "retry")
	case turnframe.OutboxCompleted:
		e.must(turnframe.CompleteClaim(e.ctx, e.s, c, "ref", at(2*time.Second)), "complete")
	case turnframe.OutboxFailed:
		e.must(turnframe.FailClaim(e.ctx, e.s, c, "declined", at(2*time.Second)), "fail")
	case turnframe.OutboxOutcomeUnknown:
		e.must(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "ref", at(2*time.Second)), "mark unknown")
	case turnframe.OutboxNeedsIntervention:
		e.must(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "ref", at(2*time.Second)), "mark unknown")
		e.must(e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictEscalate, Code: "policy.no_lookup",
			Actor: turnframe.ActorPolicy, Note: "the remote cannot be asked", Now: at(2 * time.Second)}), "escalate")
	}
	return r, c
}

func testEnqueue(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "payment/1", at(0))
	msg := turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":100}`), OrderKey: "card-7"}
	a := e.commit(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "payment/1", Type: "charged"}}, []turnframe.OutboxMessage{msg})
	is.Equal(len(a.Outbox), 1) // one row
	got := e.row(a.Outbox[0].ID)
	is.Equal(got.ID, a.Outbox[0].ID)               // id
	is.Equal(got.Account, acme)                    // the write's account
	is.Equal(got.Turn, turn)                       // the write's turn
	is.Equal(got.Key, key)                         // the committing command's key
	is.Equal(got.Destination, "payments")          // destination
	is.True(bytes.Equal(got.Payload, msg.Payload)) // payload
	is.Equal(got.OrderKey, "card-7")               // order key
	is.Equal(got.Attempts, 0)                      // never attempted
	is.Equal(got.Status, turnframe.OutboxPending)  // pending
	is.True(got.DueAt.Equal(at(time.Second)))      // due at commit time
	is.True(got.CreatedAt.Equal(at(time.Second)))  // created at commit time
	is.True(got.ClaimedAt.IsZero())                // never claimed
	is.True(got.FinishedAt.IsZero())               // not finished
	is.Equal(got.ClaimedBy, "")                    // nobody
	applied := a.Outbox[0]
	is.Equal(applied.Key, got.Key)                     // applied as stored
	is.Equal(applied.Turn, got.Turn)                   // applied as stored
	is.True(bytes.Equal(applied.Payload, got.Payload)) // applied as stored
}

func testNotBefore(t *testing.T, e *env) {
	is := is.New(t)
	later := message("")
	later.NotBefore = at(5 * time.Second)
	past := message("")
	past.NotBefore = at(-time.Hour)
	rows := e.enqueue(acme, at(0), later, past)
	is.True(e.row(rows[0].ID).DueAt.Equal(at(5 * time.Second))) // due at NotBefore
	is.True(e.row(rows[1].ID).DueAt.Equal(at(0)))               // a NotBefore in the past is due at commit

	got := e.claim(at(4*time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[1].ID}) // only the row already due
	got = e.claim(at(5*time.Second), 10, worker)
	is.Equal(claimedIDs(got), []turnframe.OutboxID{rows[0].ID}) // due at NotBefore itself
}

func testClaimOrder(t *testing.T, e *env) {
	is := is.New(t)
	late := message("")
	late.NotBefore = at(5 * time.Second)
	mid := message("")
	mid.NotBefore = at(2 * time.Second)
	first := e.enqueue(acme, at(0), late, message("")) // due at 5s, 0s
	second := e.enqueue(acme, at(0), mid, message("")) // due at 2s, 0s
	r5, r0a, r2, r0b := first[0].ID, first[1].ID, second[0].ID, second[1].ID

	is.Equal(claimedIDs(e.claim(at(10*time.Second), 1, worker)), []turnframe.OutboxID{r0a})     // the earliest due, first enqueued
	is.Equal(claimedIDs(e.claim(at(10*time.Second), 2, worker)), []turnframe.OutboxID{r0b, r2}) // then by due time
	is.Equal(claimedIDs(e.claim(at(10*time.Second), 10, worker)), []turnframe.OutboxID{r5})     // the last
	is.Equal(len(e.claim(at(10*time.Second), 10, worker)), 0)                                   // nothing left
}

func testClaimFields(t *testing.T, e *env) {
	is := is.New(t)
	msg := turnframe.OutboxMessage{Destination: "email", Payload: []byte("hello"), OrderKey: "user-1"}
	r := e.enqueue(acme, at(0), msg)[0]
	c := e.claimOne(at(time.Second), worker)
	is.Equal(c.ID, r.ID)                                 // the row
	is.Equal(c.Worker, worker)                           // the worker
	is.True(c.ClaimedAt.Equal(at(time.Second)))          // claimed at now
	is.Equal(c.Attempts, 1)                              // the first attempt
	is.Equal(c.Account, acme)                            // account
	is.Equal(c.Turn, r.Turn)                             // turn
	is.Equal(c.Key, r.Key)                               // key
	is.Equal(c.Destination, "email")                     // destination
	is.True(bytes.Equal(c.Payload, []byte("hello")))     // payload
	is.Equal(c.OrderKey, "user-1")                       // order key
	is.True(c.CreatedAt.Equal(at(0)))                    // created at
	is.True(c.LeaseUntil.Equal(at(time.Second + lease))) // the claim is leased until now + lease
	got := e.row(r.ID)
	is.Equal(got.Status, turnframe.OutboxDispatching)      // dispatching
	is.Equal(got.ClaimedBy, worker)                        // claimed by
	is.True(got.ClaimedAt.Equal(at(time.Second)))          // claimed at
	is.Equal(got.Attempts, 1)                              // attempts + 1
	is.True(got.LeaseUntil.Equal(at(time.Second + lease))) // the row is leased until now + lease
}

func testClaimsExclusive(t *testing.T, e *env) {
	is := is.New(t)
	const rows, workers = 200, 8
	msgs := make([]turnframe.OutboxMessage, rows)
	for i := range msgs {
		msgs[i] = message("")
	}
	enqueued := e.enqueue(acme, at(0), msgs...)
	is.Equal(len(enqueued), rows) // all enqueued

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = make(map[turnframe.OutboxID]int)
		errs   []error
	)
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("worker-%d", w)
			for limit := 1; ; limit = limit%5 + 1 {
				cs, err := e.s.ClaimDue(e.ctx, at(time.Second), limit, name, lease)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s claim: %w", name, err))
					mu.Unlock()
					return
				}
				if len(cs) == 0 {
					return
				}
				for _, c := range cs {
					if c.Worker != name {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s got a claim for %s", name, c.Worker))
						mu.Unlock()
					}
					err := turnframe.CompleteClaim(e.ctx, e.s, c, "ref", at(2*time.Second))
					mu.Lock()
					counts[c.ID]++
					if err != nil {
						errs = append(errs, fmt.Errorf("%s complete %v: %w", name, c.ID, err))
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	is.Equal(len(counts), rows) // every row claimed
	for id, n := range counts {
		if n != 1 {
			t.Errorf("row %v claimed %d times", id, n)
		}
	}
	done, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxCompleted, Limit: turnframe.MaxLimit})
	is.NoErr(err)             // list
	is.Equal(len(done), rows) // every row completed once
	for _, r := range done {
		is.Equal(r.Attempts, 1) // claimed once
	}
}

func testRowAllowed(t *testing.T, e *env) {
	type move struct {
		name  string
		from  turnframe.OutboxStatus
		to    turnframe.OutboxStatus
		do    func(e *env, id turnframe.OutboxID, c turnframe.Claim) error
		check func(is *is.I, before, after turnframe.OutboxRecord)
	}
	now := at(3 * time.Second)
	moves := []move{
		{"claim", turnframe.OutboxPending, turnframe.OutboxDispatching,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				_, err := e.s.ClaimDue(e.ctx, now, 10, "worker-2", lease)
				return err
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.Attempts, before.Attempts+1)     // attempts + 1
				is.Equal(after.ClaimedBy, "worker-2")           // claimed by
				is.True(after.ClaimedAt.Equal(now))             // claimed at
				is.True(after.LeaseUntil.Equal(now.Add(lease))) // leased
			}},
		{"complete", turnframe.OutboxDispatching, turnframe.OutboxCompleted,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return turnframe.CompleteClaim(e.ctx, e.s, c, "ch_42", now)
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.RemoteRef, "ch_42")        // remote ref
				is.True(after.FinishedAt.Equal(now))      // finished
				is.Equal(after.Attempts, before.Attempts) // attempts kept
			}},
		{"retry", turnframe.OutboxDispatching, turnframe.OutboxPending,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return turnframe.RetryClaim(e.ctx, e.s, c, "rate_limited", at(time.Minute))
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.DueAt.Equal(at(time.Minute))) // due at retry time
				is.Equal(after.LastCode, "rate_limited")    // code kept
				is.Equal(after.Attempts, before.Attempts)   // attempts kept
				is.True(after.FinishedAt.IsZero())          // not finished
			}},
		{"fail", turnframe.OutboxDispatching, turnframe.OutboxFailed,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return turnframe.FailClaim(e.ctx, e.s, c, "card_declined", now)
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.LastCode, "card_declined") // code
				is.True(after.FinishedAt.Equal(now))      // finished
			}},
		{"unknown", turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return turnframe.MarkClaimUnknown(e.ctx, e.s, c, "req_9", now)
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.RemoteRef, "req_9") // remote ref
				is.True(after.FinishedAt.IsZero()) // not finished
			}},
		{"expire", turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown,
			func(e *env, id turnframe.OutboxID, c turnframe.Claim) error {
				ids, err := e.s.ExpireClaims(e.ctx, c.LeaseUntil)
				if err == nil && (len(ids) != 1 || ids[0] != id) {
					err = fmt.Errorf("expired %v, want [%v]", ids, id)
				}
				return err
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.Attempts, before.Attempts)          // attempts kept
				is.True(after.DueAt.Equal(before.DueAt))           // due time kept
				is.True(after.UpdatedAt.Equal(before.LeaseUntil))  // updated at the expiry
				is.Equal(after.LastCode, turnframe.CodeLeaseEnded) // why it is unknown
				is.Equal(after.ClaimedBy, before.ClaimedBy)        // the last claim is still recorded
			}},
		{"release_claim", turnframe.OutboxDispatching, turnframe.OutboxPending,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.ReleaseClaim(e.ctx, id, 0, now) // the lease runs until 11s
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.Attempts, before.Attempts) // attempts kept
				is.True(after.DueAt.Equal(before.DueAt))  // due time kept
				is.True(after.UpdatedAt.Equal(now))       // updated at the release
				is.True(after.LeaseUntil.IsZero())        // lease cleared
			}},
		{"extend", turnframe.OutboxDispatching, turnframe.OutboxDispatching,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return extendOne(e, c, now, time.Minute)
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.LeaseUntil.Equal(now.Add(time.Minute))) // leased until now + the new lease
				is.Equal(after.Attempts, before.Attempts)             // attempts kept
				is.Equal(after.ClaimedBy, before.ClaimedBy)           // same worker
				is.True(after.ClaimedAt.Equal(before.ClaimedAt))      // same claim
			}},
		{"settle_complete", turnframe.OutboxDispatching, turnframe.OutboxCompleted,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, RemoteRef: "ch_43", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.RemoteRef, "ch_43")   // remote ref
				is.True(after.FinishedAt.Equal(now)) // finished
			}},
		{"settle_retry", turnframe.OutboxDispatching, turnframe.OutboxPending,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxPending, Code: "busy", RetryAt: at(time.Hour), Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.DueAt.Equal(at(time.Hour))) // due at retry time
				is.Equal(after.LastCode, "busy")          // code
			}},
		{"settle_fail", turnframe.OutboxDispatching, turnframe.OutboxFailed,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxFailed, Code: "gone", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.LastCode, "gone")     // code
				is.True(after.FinishedAt.Equal(now)) // finished
			}},
		{"settle_unknown", turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown,
			func(e *env, _ turnframe.OutboxID, c turnframe.Claim) error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxOutcomeUnknown, RemoteRef: "req_10", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.RemoteRef, "req_10") // remote ref
			}},
		{"resolve_completed", turnframe.OutboxOutcomeUnknown, turnframe.OutboxCompleted,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictCompleted, Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.FinishedAt.Equal(now)) // finished
			}},
		{"resolve_failed", turnframe.OutboxOutcomeUnknown, turnframe.OutboxFailed,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictFailed, Code: "not_found_remotely", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.LastCode, "not_found_remotely") // code
				is.True(after.FinishedAt.Equal(now))           // finished
			}},
		{"resolve_resend", turnframe.OutboxOutcomeUnknown, turnframe.OutboxPending,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictResend, Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.DueAt.Equal(now))           // due at once
				is.Equal(after.Attempts, before.Attempts) // attempts kept
			}},
		{"resolve_escalate", turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictEscalate, Code: "policy.unsure", Actor: turnframe.ActorPolicy, Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.LastCode, "policy.unsure")   // code
				is.Equal(after.RemoteRef, before.RemoteRef) // the remote's reference kept
				is.True(after.FinishedAt.IsZero())          // not finished
			}},
		{"intervene_completed", turnframe.OutboxNeedsIntervention, turnframe.OutboxCompleted,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictCompleted, RemoteRef: "ch_44", Actor: turnframe.ActorOperator, Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.RemoteRef, "ch_44")   // the operator's reference
				is.True(after.FinishedAt.Equal(now)) // finished
			}},
		{"intervene_failed", turnframe.OutboxNeedsIntervention, turnframe.OutboxFailed,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictFailed, Code: "refunded", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.Equal(after.LastCode, "refunded") // code
				is.True(after.FinishedAt.Equal(now)) // finished
			}},
		{"intervene_resend", turnframe.OutboxNeedsIntervention, turnframe.OutboxPending,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictResend, Actor: "app:billing", Now: now})
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.DueAt.Equal(now))           // due at once
				is.Equal(after.Attempts, before.Attempts) // attempts kept
			}},
		{"requeue", turnframe.OutboxFailed, turnframe.OutboxPending,
			func(e *env, id turnframe.OutboxID, _ turnframe.Claim) error {
				return e.s.Requeue(e.ctx, id, 0, at(time.Hour))
			},
			func(is *is.I, before, after turnframe.OutboxRecord) {
				is.True(after.DueAt.Equal(at(time.Hour)))    // due at the given time
				is.True(after.FinishedAt.IsZero())           // no longer finished
				is.Equal(after.Attempts, before.Attempts)    // attempts kept
				is.Equal(after.AttemptBase, before.Attempts) // a fresh budget from here
			}},
	}
	for _, m := range moves {
		t.Run(m.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r, c := e.rowIn(m.from, false)
			before := e.row(r.ID)
			is.NoErr(m.do(e, r.ID, c)) // the move
			after := e.row(r.ID)
			is.Equal(after.Status, m.to) // moved
			if m.to != turnframe.OutboxDispatching {
				is.True(after.LeaseUntil.IsZero()) // a row holds a lease only while dispatching
			}
			m.check(is, before, after)
		})
	}
}

// extendOne extends one claim through ExtendClaims and returns its result.
func extendOne(e *env, c turnframe.Claim, now time.Time, d time.Duration) error {
	results, err := e.s.ExtendClaims(e.ctx, []turnframe.Claim{c}, now, d)
	if err != nil {
		return err
	}
	if len(results) != 1 {
		return fmt.Errorf("extend returned %d results for 1 claim", len(results))
	}
	return results[0]
}

// settleOneBatch settles one row through Settle.
func settleOneBatch(e *env, s turnframe.OutboxSettlement) error {
	results, err := e.s.Settle(e.ctx, []turnframe.OutboxSettlement{s})
	if err != nil {
		return err
	}
	if len(results) != 1 {
		return fmt.Errorf("settle returned %d results for 1 settlement", len(results))
	}
	return results[0]
}

func testRowRefused(t *testing.T, e *env) {
	others := []turnframe.OutboxStatus{turnframe.OutboxPending, turnframe.OutboxCompleted, turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention}
	// A settlement needs the row Dispatching: from every other status it is
	// ErrClaimLost, even with the last claim made on the row.
	for _, from := range others {
		for _, k := range settleKinds {
			t.Run(fmt.Sprintf("%s_from_%v", k.name, from), func(t *testing.T) {
				e := newEnv(t, e.open)
				_, c := e.rowIn(from, true)
				e.refusedOp(k.name, turnframe.ErrClaimLost, func() error { return e.settleClaim(k, c, at(3*time.Second)) })
			})
		}
	}
	all := append([]turnframe.OutboxStatus{turnframe.OutboxDispatching}, others...)
	for _, from := range all {
		if !from.IsUncertain() {
			for _, v := range allVerdicts {
				t.Run(fmt.Sprintf("resolve_%v_from_%v", v, from), func(t *testing.T) {
					e := newEnv(t, e.open)
					r, _ := e.rowIn(from, false)
					e.refusedOp("resolve", turnframe.ErrConflict, func() error {
						return e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: v, Actor: turnframe.ActorOperator, Now: at(3 * time.Second)})
					})
				})
			}
		}
		if from != turnframe.OutboxFailed {
			t.Run(fmt.Sprintf("requeue_from_%v", from), func(t *testing.T) {
				e := newEnv(t, e.open)
				r, _ := e.rowIn(from, false)
				e.refusedOp("requeue", turnframe.ErrConflict, func() error { return e.s.Requeue(e.ctx, r.ID, 0, at(3*time.Second)) })
			})
		}
		if from != turnframe.OutboxPending {
			t.Run(fmt.Sprintf("claim_from_%v", from), func(t *testing.T) {
				is := is.New(t)
				e := newEnv(t, e.open)
				e.rowIn(from, false)
				before := e.snapshot()
				is.Equal(len(e.claim(at(time.Hour), 10, "worker-2")), 0) // only a pending row is claimed
				e.unchanged(before, "claim")
			})
		}
		if from != turnframe.OutboxDispatching {
			t.Run(fmt.Sprintf("release_claim_from_%v", from), func(t *testing.T) {
				e := newEnv(t, e.open)
				r, _ := e.rowIn(from, true)
				e.refusedOp("release claim", turnframe.ErrConflict, func() error { return e.s.ReleaseClaim(e.ctx, r.ID, 0, at(3*time.Second)) })
			})
			// A pending row here was retried: its claim is the last one made.
			t.Run(fmt.Sprintf("extend_from_%v", from), func(t *testing.T) {
				e := newEnv(t, e.open)
				_, c := e.rowIn(from, true)
				e.refusedOp("extend", turnframe.ErrClaimLost, func() error { return extendOne(e, c, at(3*time.Second), time.Hour) })
			})
		}
	}
}

func testLostClaim(t *testing.T, e *env) {
	for _, k := range settleKinds {
		t.Run(k.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r := e.enqueue(acme, at(0), message(""))[0]

			// Another worker holds the row after its lease ended, an
			// expiry, a resend verdict and a reclaim.
			old := e.claimOne(at(time.Second), worker)
			is.Equal(e.expire(old.LeaseUntil), []turnframe.OutboxID{r.ID}) // expired
			is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictResend, Now: old.LeaseUntil}))
			other := e.claimOne(old.LeaseUntil, "worker-2")
			e.refusedOp("settle after another worker reclaimed", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, old, other.ClaimedAt.Add(time.Second)) })

			// The same worker holds it again, at another attempt, after an
			// operator released it.
			is.NoErr(e.s.ReleaseClaim(e.ctx, r.ID, 0, other.LeaseUntil)) // released
			mine := e.claimOne(other.LeaseUntil, worker)
			is.Equal(mine.Attempts, 3) // the third attempt
			later := mine.ClaimedAt.Add(time.Second)
			e.refusedOp("settle with an older attempt of the same worker", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, old, later) })
			e.refusedOp("settle with the other worker's expired claim", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, other, later) })

			// A forged attempt number or worker.
			wrong := mine
			wrong.Attempts = 2
			e.refusedOp("settle with the wrong attempt", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, wrong, later) })
			wrong = mine
			wrong.Worker = "worker-9"
			e.refusedOp("settle as another worker", turnframe.ErrClaimLost, func() error { return e.settleClaim(k, wrong, later) })

			// The holder settles; settling again is a lost claim.
			is.NoErr(e.settleClaim(k, mine, later)) // the holder settles
			for _, again := range settleKinds {
				e.refusedOp("settle an already settled row", turnframe.ErrClaimLost, func() error { return e.settleClaim(again, mine, later.Add(time.Second)) })
			}
			is.Equal(e.row(r.ID).Status, k.to) // settled once
		})
	}
}

func testSettleBatch(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message(""), message(""), message(""), message(""))
	cs := e.claim(at(time.Second), 10, worker)
	is.Equal(len(cs), 4)                                                             // all claimed
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[1], "first", at(2*time.Second))) // settled before the batch

	results, err := e.s.Settle(e.ctx, []turnframe.OutboxSettlement{
		{Claim: cs[0], To: turnframe.OutboxCompleted, RemoteRef: "ok-0", Now: at(3 * time.Second)},
		{Claim: cs[1], To: turnframe.OutboxFailed, Code: "late", Now: at(3 * time.Second)},
		{Claim: cs[2], To: turnframe.OutboxPending, Code: "busy", RetryAt: at(time.Minute), Now: at(3 * time.Second)},
		{Claim: cs[3], To: turnframe.OutboxOutcomeUnknown, RemoteRef: "req-3", Now: at(3 * time.Second)},
	})
	is.NoErr(err)                                                 // the batch as a whole
	is.Equal(len(results), 4)                                     // one result per settlement
	is.NoErr(results[0])                                          // settled
	is.True(errors.Is(results[1], turnframe.ErrClaimLost))        // the lost claim refuses only itself
	is.NoErr(results[2])                                          // settled
	is.NoErr(results[3])                                          // settled
	is.Equal(e.row(rows[0].ID).Status, turnframe.OutboxCompleted) // completed
	lost := e.row(rows[1].ID)
	is.Equal(lost.Status, turnframe.OutboxCompleted)                   // the lost claim changed nothing
	is.Equal(lost.RemoteRef, "first")                                  // the first settlement stands
	is.Equal(e.row(rows[2].ID).Status, turnframe.OutboxPending)        // retried
	is.Equal(e.row(rows[3].ID).Status, turnframe.OutboxOutcomeUnknown) // unknown

	// An invalid settlement refuses only itself too.
	c := e.claimOne(at(time.Minute), worker)
	results, err = e.s.Settle(e.ctx, []turnframe.OutboxSettlement{
		{Claim: c, To: turnframe.OutboxDispatching, Now: at(time.Minute)},
		{Claim: c, To: turnframe.OutboxCompleted, RemoteRef: "ok-2", Now: at(time.Minute)},
	})
	is.NoErr(err)                                                 // the batch as a whole
	is.Equal(len(results), 2)                                     // one result per settlement
	is.True(errors.Is(results[0], turnframe.ErrInvalid))          // a claim does not settle to dispatching
	is.NoErr(results[1])                                          // the valid one settles
	is.Equal(e.row(rows[2].ID).Status, turnframe.OutboxCompleted) // completed

	results, err = e.s.Settle(e.ctx, nil)
	is.NoErr(err)             // an empty batch
	is.Equal(len(results), 0) // no results
}

func testSettleCode(t *testing.T, e *env) {
	for _, tc := range []struct {
		to   turnframe.OutboxStatus
		code string
	}{
		{turnframe.OutboxCompleted, "http.201"},
		{turnframe.OutboxPending, "http.503"},
		{turnframe.OutboxFailed, "http.400"},
		{turnframe.OutboxOutcomeUnknown, "http.timeout"},
	} {
		t.Run(tc.to.String(), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r := e.enqueue(acme, at(0), message(""))[0]
			c := e.claimOne(at(time.Second), worker)
			st := turnframe.OutboxSettlement{Claim: c, To: tc.to, Code: tc.code, RemoteRef: "req_1", Now: at(2 * time.Second)}
			if tc.to == turnframe.OutboxPending {
				st.RetryAt = at(time.Minute)
			}
			is.NoErr(settleOneBatch(e, st))         // settled
			is.Equal(e.row(r.ID).LastCode, tc.code) // the sender's code is the row's last code
		})
	}
}

func testCompletedCode(t *testing.T, e *env) {
	for _, tc := range []struct {
		name     string
		complete func(e *env, c turnframe.Claim) error
		want     string
	}{
		{"ThroughSettle", func(e *env, c turnframe.Claim) error {
			return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Code: "http.201", Now: at(3 * time.Second)})
		}, "http.201"},
		{"ThroughCompleteWhichCarriesNoCode", func(e *env, c turnframe.Claim) error {
			return turnframe.CompleteClaim(e.ctx, e.s, c, "ch_1", at(3*time.Second))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			r := e.enqueue(acme, at(0), message(""))[0]
			first := e.claimOne(at(time.Second), worker)
			is.NoErr(settleOneBatch(e, turnframe.OutboxSettlement{Claim: first, To: turnframe.OutboxPending, Code: "http.503", RetryAt: at(2 * time.Second), Now: at(time.Second)})) // an earlier retry
			is.Equal(e.row(r.ID).LastCode, "http.503")                                                                                                                               // the retry's code, until
			c := e.claimOne(at(2*time.Second), worker)
			is.NoErr(tc.complete(e, c))             // completed
			is.Equal(e.row(r.ID).LastCode, tc.want) // the completion's code, not the earlier failure
		})
	}
}

func testRequeueBudget(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, c, "http.503", at(2*time.Second))) // first attempt retried
	c = e.claimOne(at(2*time.Second), worker)
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "attempts_exhausted", at(3*time.Second))) // second attempt failed
	is.Equal(e.row(r.ID).AttemptBase, 0)                                                  // no requeue yet

	is.NoErr(e.s.Requeue(e.ctx, r.ID, 0, at(4*time.Second))) // requeued
	got := e.row(r.ID)
	is.Equal(got.Attempts, 2)    // attempts kept
	is.Equal(got.AttemptBase, 2) // the new budget begins after them

	c = e.claimOne(at(4*time.Second), worker)
	is.Equal(c.Attempts, 3)                                                               // attempts keep rising: the fence never repeats
	is.Equal(c.AttemptBase, 2)                                                            // the claim carries the budget's base
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, c, "attempts_exhausted", at(5*time.Second))) // the new budget spent
	is.NoErr(e.s.Requeue(e.ctx, r.ID, 0, at(6*time.Second)))                              // requeued again
	is.Equal(e.row(r.ID).AttemptBase, 3)                                                  // a fresh budget again
	c = e.claimOne(at(6*time.Second), worker)
	is.Equal(c.Attempts, 4) // the fourth attempt
}

// testNotSentBudget: a claim settled back to Pending with CodeNotSent (the
// dispatcher stopped before its send began) sent nothing, so it spends none
// of the row's attempt budget: AttemptBase rises with Attempts. Attempts
// itself still rises, so the claim's fence never repeats; a retry that was
// sent spends its attempt as before.
func testNotSentBudget(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	for i := 1; i <= 3; i++ {
		c := e.claimOne(at(time.Duration(i)*time.Second), worker)
		is.Equal(c.Attempts, i)                                                                                // attempts keep rising
		is.NoErr(turnframe.RetryClaim(e.ctx, e.s, c, turnframe.CodeNotSent, at(time.Duration(i)*time.Second))) // put back unsent
		got := e.row(r.ID)
		is.Equal(got.Attempts, i)    // the claim counted
		is.Equal(got.AttemptBase, i) // but spent nothing of the budget
		is.Equal(got.Status, turnframe.OutboxPending)
		is.Equal(got.LastCode, turnframe.CodeNotSent)
	}
	c := e.claimOne(at(4*time.Second), worker)
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, c, "http.503", at(5*time.Second))) // a send that went out
	got := e.row(r.ID)
	is.Equal(got.Attempts, 4)    // counted
	is.Equal(got.AttemptBase, 3) // and spent: one attempt of the budget
}

func testUnknownNotClaimed(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "req-1", at(2*time.Second))) // unknown
	is.Equal(len(e.claim(at(time.Hour), 10, worker)), 0)                            // never claimed again
	is.Equal(len(e.expire(at(time.Hour))), 0)                                       // an unknown row is not a claim to expire
	is.Equal(len(e.claim(at(24*time.Hour), 10, worker)), 0)                         // still not claimed

	is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictResend, Code: "never_arrived", Now: at(25 * time.Hour)})) // resend
	again := e.claimOne(at(25*time.Hour), worker)
	is.Equal(again.ID, r.ID)    // claimed again after a resend verdict
	is.Equal(again.Attempts, 2) // attempts kept across the resend
}

func testPrune(t *testing.T, e *env) {
	is := is.New(t)
	msgs := make([]turnframe.OutboxMessage, 7)
	for i := range msgs {
		msgs[i] = message("")
	}
	rows := e.enqueue(acme, at(0), msgs...)
	cs := e.claim(at(time.Second), 10, worker)
	is.Equal(len(cs), 7) // all claimed
	t1, t3 := at(time.Second), at(3*time.Second)
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[0], "", t1))             // completed before the cutoff
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, cs[1], "declined", t1))         // failed before the cutoff
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[2], "", t3))             // completed at the cutoff
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, cs[3], "busy", at(time.Hour))) // pending
	// cs[4] stays dispatching
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, cs[5], "", t1))                                                             // unknown
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, cs[6], "", t1))                                                             // unknown, then
	is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: rows[6].ID, Verdict: turnframe.VerdictFailed, Code: "gone", Now: t1})) // failed before the cutoff

	n, err := e.s.Prune(e.ctx, t3)
	is.NoErr(err)  // prune
	is.Equal(n, 3) // the rows finished before the cutoff
	for i, r := range rows {
		_, err := e.s.GetOutbox(e.ctx, r.ID)
		switch i {
		case 0, 1, 6:
			is.True(errors.Is(err, turnframe.ErrNotFound)) // pruned
		default:
			is.NoErr(err) // kept
		}
	}
	err = turnframe.CompleteClaim(e.ctx, e.s, cs[0], "", t3)
	is.True(errors.Is(err, turnframe.ErrClaimLost)) // a settlement needs the claim, and a pruned row holds none
	n, err = e.s.Prune(e.ctx, t3)
	is.NoErr(err)  // prune again
	is.Equal(n, 0) // nothing more
	n, err = e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)  // prune later
	is.Equal(n, 1) // the row completed at the first cutoff
	left, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: 100})
	is.NoErr(err)          // list
	is.Equal(len(left), 3) // pending, dispatching and unknown rows are never pruned
}

// A store may prune in batches of storekit.PruneBatch rows; a prune of
// exactly one batch, then of one more row than a batch, deletes every row
// before its cut-off and no other, each with its history, and returns the
// whole count.
func testPruneBatches(t *testing.T, e *env) {
	is := is.New(t)
	const b = storekit.PruneBatch
	msgs := make([]turnframe.OutboxMessage, 2*b+3)
	for i := range msgs {
		msgs[i] = message("")
	}
	rows := e.enqueue(acme, at(0), msgs...)
	cs := e.claim(at(time.Second), len(msgs), worker)
	is.Equal(len(cs), len(msgs)) // all claimed
	sets := make([]turnframe.OutboxSettlement, 0, len(cs)-1)
	for i, c := range cs[:len(cs)-1] { // the last stays dispatching
		switch {
		case i < b: // a batch finished at 1s
			sets = append(sets, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: at(time.Second)})
		case i < 2*b+1: // a batch and one row finished at 2s
			sets = append(sets, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxFailed, Code: "declined", Now: at(2 * time.Second)})
		default: // one finished at 3s
			sets = append(sets, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: at(3 * time.Second)})
		}
	}
	results, err := e.s.Settle(e.ctx, sets)
	is.NoErr(err) // settle
	for _, err := range results {
		is.NoErr(err) // each settled
	}
	byID := map[turnframe.OutboxID]int{}
	for i, c := range cs {
		byID[c.ID] = i
	}
	keptHistory := e.history(turnframe.OutboxSubject(acme, cs[2*b+1].ID))

	n, err := e.s.Prune(e.ctx, at(2*time.Second))
	is.NoErr(err)  // prune one batch
	is.Equal(n, b) // exactly the rows finished at 1s
	n, err = e.s.Prune(e.ctx, at(3*time.Second))
	is.NoErr(err)    // prune a batch and one row
	is.Equal(n, b+1) // exactly the rows finished at 2s
	for _, r := range rows {
		_, err := e.s.GetOutbox(e.ctx, r.ID)
		if i := byID[r.ID]; i < 2*b+1 {
			is.True(errors.Is(err, turnframe.ErrNotFound))                   // pruned
			is.Equal(len(e.history(turnframe.OutboxSubject(acme, r.ID))), 0) // with its history
		} else {
			is.NoErr(err) // kept
		}
	}
	is.Equal(e.history(turnframe.OutboxSubject(acme, cs[2*b+1].ID)), keptHistory) // a row kept keeps its history
	left, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: 100})
	is.NoErr(err)          // list
	is.Equal(len(left), 2) // the row finished at the cut-off and the dispatching one
}

func testPruneKeepsKeys(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "payment/1", at(0))
	e.commit(acme, turn, key, attempt, at(0), []turnframe.Event{{Case: "payment/1", Type: "charged"}}, []turnframe.OutboxMessage{message("")})
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Phase: turnframe.PhaseDelivered})
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "ch_1", at(time.Second))) // complete
	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)  // prune
	is.Equal(n, 1) // the row is gone
	stored := e.entry(acme, key)
	is.Equal(stored.Status, turnframe.JournalCommitted) // the key is still there

	// A late retry of the old request, in a new turn, runs nothing.
	turn2 := e.begin(acme, at(2*time.Hour))
	a := e.admit(acme, turn2, at(2*time.Hour), command(key, "payment/1"))
	is.True(sameEntry(a.Admitted[0], stored)) // the existing, committed entry
	es, err := e.s.ForTurn(e.ctx, acme, turn2)
	is.NoErr(err)        // for turn
	is.Equal(len(es), 0) // nothing admitted again
	// And the key still refuses another command.
	other := command(key, "payment/1")
	other.Payload = []byte(`{"amount":999}`)
	e.refused(turnframe.Write{Account: acme, Turn: turn2, Now: at(2 * time.Hour), Admit: []turnframe.Command{other}}, turnframe.ErrConflict, "reuse a pruned turn's key")
}

func testListOutbox(t *testing.T, e *env) {
	is := is.New(t)
	a := e.enqueue(acme, at(0), message(""), message(""))
	g := e.enqueue(globex, at(time.Second), message(""))
	b := e.enqueue(acme, at(2*time.Second), message(""))
	c := e.claim(at(time.Second), 1, worker)[0] // the oldest acme row
	is.Equal(c.ID, a[0].ID)

	list := func(f turnframe.OutboxFilter) []turnframe.OutboxID {
		t.Helper()
		rs, err := e.s.ListOutbox(e.ctx, f)
		is.NoErr(err) // list outbox
		var ids []turnframe.OutboxID
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	is.Equal(list(turnframe.OutboxFilter{Limit: 10}), []turnframe.OutboxID{a[0].ID, a[1].ID, g[0].ID, b[0].ID})                          // all, oldest first
	is.Equal(list(turnframe.OutboxFilter{Limit: 2}), []turnframe.OutboxID{a[0].ID, a[1].ID})                                             // limit keeps the oldest
	is.Equal(list(turnframe.OutboxFilter{Account: acme, Limit: 10}), []turnframe.OutboxID{a[0].ID, a[1].ID, b[0].ID})                    // one account
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxPending, Limit: 10}), []turnframe.OutboxID{a[1].ID, g[0].ID, b[0].ID})  // one status
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxDispatching, Account: acme, Limit: 10}), []turnframe.OutboxID{a[0].ID}) // both
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxDispatching, Account: globex, Limit: 10}), []turnframe.OutboxID(nil))   // none
}

func testOutboxMissing(t *testing.T, e *env) {
	is := is.New(t)
	id := e.ids.OutboxID(at(0))
	_, err := e.s.GetOutbox(e.ctx, id)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // get
	err = e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: turnframe.VerdictCompleted, Now: at(0)})
	is.True(errors.Is(err, turnframe.ErrNotFound)) // resolve
	err = e.s.Requeue(e.ctx, id, 0, at(0))
	is.True(errors.Is(err, turnframe.ErrNotFound)) // requeue
	err = e.s.ReleaseClaim(e.ctx, id, 0, at(0))
	is.True(errors.Is(err, turnframe.ErrNotFound)) // release claim
	err = extendOne(e, turnframe.Claim{OutboxEntry: turnframe.OutboxEntry{ID: id, Attempts: 1}, Worker: worker}, at(0), lease)
	is.True(errors.Is(err, turnframe.ErrClaimLost)) // extend: no row is held by a claim
}

// testSettleBatchNotes settles three claims of one worker in one batch, all
// to OutcomeUnknown, one of them with CodeLeaseEnded: the records differ in
// their note alone (an expiry's note says why the outcome is unknown), and
// each row's record keeps its own, wherever the row is in the batch.
func testSettleBatchNotes(t *testing.T, e *env) {
	for _, leaseEnded := range []int{0, 1} {
		t.Run(fmt.Sprintf("LeaseEndedAt%d", leaseEnded), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			rows := e.enqueue(acme, at(0), message(""), message(""), message(""))
			cs := e.claim(at(time.Second), 10, worker)
			is.Equal(len(cs), 3) // all claimed, by one worker
			sts := make([]turnframe.OutboxSettlement, len(cs))
			for i, c := range cs {
				sts[i] = turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxOutcomeUnknown, Code: "http.timeout", Now: at(2 * time.Second)}
			}
			sts[leaseEnded].Code = turnframe.CodeLeaseEnded
			results, err := e.s.Settle(e.ctx, sts)
			is.NoErr(err)
			for i, r := range results {
				is.NoErr(r) // every settlement lands
				hist := e.history(turnframe.OutboxSubject(acme, rows[i].ID))
				last := hist[len(hist)-1]
				is.Equal(last.To, turnframe.OutboxOutcomeUnknown.String())
				is.Equal(last.Code, sts[i].Code)
				if i == leaseEnded {
					is.True(last.Note != "") // says why the outcome is unknown
				} else {
					is.Equal(last.Note, "") // no note but its own: none
				}
			}
		})
	}
}

// Settle: results[i] is the outcome of settlements[i] alone, and a
// settlement needs the claim (the row still Dispatching under it). The
// first of two settlements of one claim in one batch takes the row out of
// Dispatching: the second finds the claim lost, and refuses only itself.
func testSettleTwiceInOneBatch(t *testing.T, e *env) {
	is := is.New(t)
	rows := e.enqueue(acme, at(0), message(""), message(""))
	cs := e.claim(at(time.Second), 10, worker)
	is.Equal(len(cs), 2) // both claimed
	results, err := e.s.Settle(e.ctx, []turnframe.OutboxSettlement{
		{Claim: cs[0], To: turnframe.OutboxCompleted, RemoteRef: "ok-0", Now: at(2 * time.Second)},
		{Claim: cs[0], To: turnframe.OutboxFailed, Code: "declined", Now: at(2 * time.Second)},
		{Claim: cs[1], To: turnframe.OutboxCompleted, RemoteRef: "ok-1", Now: at(2 * time.Second)},
	})
	is.NoErr(err)                                          // the batch as a whole
	is.Equal(len(results), 3)                              // one result per settlement
	is.NoErr(results[0])                                   // the first settlement lands
	is.True(errors.Is(results[1], turnframe.ErrClaimLost)) // the second finds the claim gone
	is.NoErr(results[2])                                   // the other row settles
	first := e.row(rows[0].ID)
	is.Equal(first.Status, turnframe.OutboxCompleted) // the first settlement stands
	is.Equal(first.RemoteRef, "ok-0")
	is.Equal(e.row(rows[1].ID).Status, turnframe.OutboxCompleted)
}
