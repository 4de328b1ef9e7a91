package turnframe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The edges of the runtime that issues 11 and 12 found open, each attacked
// here the way an outsider would: the second caller at the worst moment.

// rtHeld runs h on a goroutine through rt.Execute of turn, and returns once
// h has started for key, with a function that lets it go on and waits for
// Execute's end.
func rtHeld(t *testing.T, rt *turnframe.Runtime, turn turnframe.TurnID, key turnframe.IdempotencyKey, out turnframe.Outcome) (finish func() (turnframe.ExecuteReport, error)) {
	t.Helper()
	started, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(proceed) }) })
	h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		if call.Command.Key != key {
			return rtScript(ctx, call, 1)
		}
		close(started)
		<-proceed
		return out
	})
	type result struct {
		report turnframe.ExecuteReport
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, err := rt.Execute(context.Background(), rtAccount, turn, h)
		done <- result{r, err}
	}()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("Execute returned before the handler of %q started: %v", key, r.err)
	}
	return func() (turnframe.ExecuteReport, error) {
		once.Do(func() { close(proceed) })
		r := <-done
		return r.report, r.err
	}
}

// rtResumer is a RecoveryHandler that resumes commands through rt.Execute
// with h and does nothing for the other actions.
type rtResumer struct {
	rt *turnframe.Runtime
	h  *rtHandler
}

func (r *rtResumer) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	_, err := r.rt.Execute(ctx, m.Account, m.Turn, r.h)
	return err
}

func (*rtResumer) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

func (*rtResumer) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// The last command's outcome lands even when the turn's move to Committed
// that would follow it is refused (issue 11, item 2).
func TestRuntimeRecordsTheLastOutcomeWhateverTheTurnBecame(t *testing.T) {
	outcomes := []struct {
		name   string
		out    turnframe.Outcome
		status turnframe.JournalStatus
	}{
		{"an unknown", turnframe.Unknown("ref-1"), turnframe.JournalOutcomeUnknown},
		{"a commit", turnframe.Commit([]turnframe.Event{{Case: "card/1", Type: "charged"}}, turnframe.OutboxMessage{Destination: "payments"}), turnframe.JournalCommitted},
		{"a reject", turnframe.Reject("card.declined"), turnframe.JournalRejected},
	}
	for _, tt := range outcomes {
		t.Run(tt.name+" on a turn abandoned while it ran", func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				finish := rtHeld(t, rt, turn, "k-charge", tt.out)
				is.NoErr(rt.Abandon(context.Background(), rtAccount, turn, "user.left")) // abandoned meanwhile
				report, err := finish()
				is.NoErr(err)                                               // the outcome is written
				is.True(report.Results[0].Ran)                              // by this attempt
				is.Equal(rtEntry(t, store, "k-charge").Status, tt.status)   // as the handler said
				is.Equal(rtPhase(t, store, turn), turnframe.PhaseAbandoned) // the phase stays
				is.Equal(report.Phase, turnframe.PhaseAbandoned)            // and is reported
				if tt.status == turnframe.JournalOutcomeUnknown {
					markers, err := turnframe.NewRecovery(store).Unfinished(context.Background(), turnframe.RecoveryScope{}, 10)
					is.NoErr(err)
					is.Equal(len(markers), 1) // recovery still lists it for reconciliation
				}
			})
		})
	}
	t.Run("a commit while a settlement put another entry back to pending", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			rt := turnframe.New(store)
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"), rtCmd("k-book", "flight/7", "book"))
			finish := rtHeld(t, rt, turn, "k-book", turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "seats"}))
			// k-charge ran first and is unknown; the remote says it never got it.
			is.NoErr(turnframe.NewRecovery(store).Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
				turnframe.Decision{Verdict: turnframe.VerdictResend}))
			report, err := finish()
			is.NoErr(err)                                                            // k-book's commit lands
			is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // committed once
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseExecuting)              // not committed: k-charge is pending again
			is.Equal(report.Results[1].Kind, turnframe.ResultCommitted)
			h := rtNewHandler(rtScript)
			report, err = rt.Execute(ctx, rtAccount, turn, h)
			is.NoErr(err)                                               // the resend runs
			is.Equal(h.callsOf("k-book"), 0)                            // the commit never runs again
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted) // and now the turn commits
		})
	})
}

// A resend of a command of an abandoned turn is refused: its turn never
// runs it, so it would silently never be sent (issue 11, item 6). The
// policy of a remote that deduplicates, which would resend it on a live
// turn, hands it to a person instead.
func TestSettleRefusesAResendOnAnAbandonedTurn(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		abandonedUnknownCharge(t, store)
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		trail := histLines(t, store, subject)
		err := turnframe.NewRecovery(store).Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictResend})
		is.True(errors.Is(err, turnframe.ErrConflict))                                  // refused
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // nothing written
		is.Equal(histLines(t, store, subject), trail)                                   // not even to the audit trail
		is.NoErr(turnframe.NewRecovery(store).Settle(ctx, subject, turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "remote.none"}))
		e := rtEntry(t, store, "k-charge")
		is.Equal(e.Status, turnframe.JournalRejected) // other verdicts still settle it
		is.Equal(e.Code, "remote.none")               // with their code
	})
	t.Run("the policy of a deduplicating remote escalates instead", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			abandonedUnknownCharge(t, store)
			r := turnframe.NewRecovery(store, turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: 24 * time.Hour}))
			report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
			is.NoErr(err)
			res := policyFor(t, report, turnframe.JournalSubject(rtAccount, "k-charge"))
			is.Equal(res.Outcome, turnframe.PolicyEscalated) // not resent: nothing would run it
			is.Equal(res.Code, turnframe.CodeNoSafeResolution)
			is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalNeedsIntervention) // a person decides
			is.Equal(len(report.NeedsIntervention), 1)                                         // and is told so
			is.Equal(report.NeedsIntervention[0].Key, turnframe.IdempotencyKey("k-charge"))
		})
	})
	// Remote: "NotHappened resends it, at most Resends times, then
	// escalates (a command of an abandoned turn: rejects it)". Nothing will
	// run it again, so a lookup that finds it never arrived settles it.
	t.Run("a lookup that finds it never arrived rejects it", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			abandonedUnknownCharge(t, store)
			r := turnframe.NewRecovery(store, turnframe.WithCommand("charge",
				turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened, "")}))
			report, err := r.Recover(context.Background(), turnframe.RecoveryScope{}, &recHandler{})
			is.NoErr(err)
			res := policyFor(t, report, turnframe.JournalSubject(rtAccount, "k-charge"))
			is.NoErr(res.Err)
			is.Equal(res.Outcome, turnframe.PolicyRejected) // not resent: nothing would run it
			e := rtEntry(t, store, "k-charge")
			is.Equal(e.Status, turnframe.JournalRejected) // settled, not left unknown
			is.Equal(e.Code, turnframe.CodeVerifiedNotHappened)
		})
	})
}

// abandonedUnknownCharge leaves the command k-charge OutcomeUnknown (the
// script's answer to "charge") on a turn then abandoned.
func abandonedUnknownCharge(t *testing.T, store turnframe.Store) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	rt := turnframe.New(store)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
	_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
	is.NoErr(err)
	is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // the charge's outcome unknown
	is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
}

// A clock out of the range the stores keep is refused at the boundary, never
// a panic in the id generator (issue 11, item 7).
func TestRuntimeRefusesAClockOutOfRange(t *testing.T) {
	clocks := []struct {
		name string
		now  time.Time
	}{
		{"before 1970", time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)},
		{"at the Unix epoch", time.Unix(0, 0)},
		{"after the year 9999", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"past what a ULID holds", time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range clocks {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return c.now }))
				conv := rt.NewConversationID() // never panics
				is.True(!conv.IsZero())
				_, err := rt.Receive(context.Background(), rtAccount, conv, "hello")
				is.True(errors.Is(err, turnframe.ErrInvalid)) // refused
				markers, err := turnframe.NewRecovery(store).Unfinished(context.Background(), turnframe.RecoveryScope{}, 10)
				is.NoErr(err)
				is.Equal(len(markers), 0) // nothing written
			})
		})
	}
}

// A replay record a store could not read back is refused before anything is
// written, and the turn stays deliverable (issue 11, item 8).
func TestRuntimeRefusesABadReplayRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "what time is it")
		is.NoErr(err)
		bad := turnframe.Plan{Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Basis: 7}}}}
		_, err = rt.Plan(ctx, rtAccount, turn, bad)
		is.True(errors.Is(err, turnframe.ErrInvalid))              // refused
		is.Equal(rtPhase(t, store, turn), turnframe.PhaseReceived) // nothing written
		is.NoErr(rt.Deliver(ctx, rtAccount, turn, "noon"))         // the turn is not wedged
	})
}

// A handler panic is reported with its value and stack, and logged at error
// level to slog.Default() when the app passed no logger (issue 11, item 11).
func TestAHandlerPanicIsNeverSilent(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		logs.Reset()
		rt := turnframe.New(store) // no logger given
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-boom", "card/1", "charge"))
		report, err := rt.Execute(context.Background(), rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			panic("card reader on fire")
		}))
		is.NoErr(err)
		r := report.Results[0]
		is.Equal(r.Kind, turnframe.ResultUnknown)                       // unknown: it may have acted
		is.Equal(r.Panic, "card reader on fire")                        // the report carries the value
		is.True(bytes.Contains(r.Stack, []byte("turn_edge_test.go")))   // and where it came from
		is.True(strings.Contains(logs.String(), "level=ERROR"))         // logged at error level
		is.True(strings.Contains(logs.String(), "card reader on fire")) // with the value
		is.True(!strings.Contains(logs.String(), "level=DEBUG"))        // and only warnings and errors
	})
}

// A handler re-run after a conflict renews its lease, which touches the
// turn: a sweep scoped as the docs recommend leaves it alone, and even one
// that lists it does not run the command a second time at once (issue 12,
// item 10).
func TestAConflictReRunIsNotTakenForStale(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		var clock sync.Mutex
		now := time.Now().UTC()
		tick := func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
		advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
		rt := turnframe.New(store, turnframe.WithClock(tick))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("a-hold", "flight/7", "hold"))
		advance(time.Hour) // the turn is old

		started, proceed := make(chan struct{}, 2), make(chan struct{})
		calls := 0
		hold := turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
			calls++
			if calls == 1 {
				// Another turn commits to the case: this commit conflicts.
				b := turnframe.New(store, turnframe.WithClock(tick))
				other := rtPlanned(t, b, rtAccount, rtCmd("b-bump", "flight/7", "bump"))
				if _, err := b.Execute(ctx, rtAccount, other, rtNewHandler(rtScript)); err != nil {
					t.Errorf("bump: %v", err)
				}
				if err := b.Deliver(ctx, rtAccount, other, "bumped"); err != nil {
					t.Errorf("deliver the bump: %v", err)
				}
				advance(time.Hour) // the first run was slow: the take's lease and its touch of the turn are old now
			} else {
				started <- struct{}{}
				<-proceed // the re-run is slow
			}
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "held"}})
		})
		done := make(chan error, 1)
		go func() {
			_, err := rt.Execute(ctx, rtAccount, turn, hold)
			done <- err
		}()
		<-started // the re-run is running

		// The sweep the docs recommend: turns not updated in the last minute.
		h := &rtResumer{rt: turnframe.New(store, turnframe.WithClock(tick)), h: rtNewHandler(rtScript)}
		report, err := turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{UpdatedBefore: tick().Add(-time.Minute)}, h)
		is.NoErr(err)
		is.Equal(report.Turns.Turns, 0) // the renewal touched the turn: not stale
		// A sweep that lists it anyway runs nothing while the lease holds.
		report, err = turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, h)
		is.NoErr(err)
		is.Equal(report.Turns.Turns, 1)
		is.Equal(h.h.callsOf("a-hold"), 0) // never a second run at once
		close(proceed)
		is.NoErr(<-done)
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7"), map[turnframe.IdempotencyKey]int{"a-hold": 1, "b-bump": 1})
	})
}

// Recover pages through every unfinished turn: turns whose unknown nobody
// can settle yet never starve the turns behind them, not even past a page
// of turns (issue 12, item 11).
func TestRecoverReachesEveryTurnPageByPage(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		var stuck []turnframe.TurnID
		for i := range 3 { // delivered turns each holding an unknown no Remote settles
			turn := rtPlanned(t, rt, rtAccount, rtCmd(turnframe.IdempotencyKey(fmt.Sprint("k-charge-", i)), "card/1", "charge"))
			_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
			is.NoErr(err)
			is.NoErr(rt.Deliver(ctx, rtAccount, turn, "we are verifying your payment"))
			stuck = append(stuck, turn)
		}
		const received = 256 // a page of turns left after Receive, behind them
		for range received {
			_, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "hello")
			is.NoErr(err)
		}
		planned := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book")) // behind them all
		h := &rtResumer{rt: rt, h: rtNewHandler(rtScript)}
		report, err := turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, h)
		is.NoErr(err)
		is.Equal(report.Turns.Turns, len(stuck)+received+1)                             // every turn, once
		is.Equal(report.Turns.Actions[turnframe.ActionReconcileExternal], len(stuck))   // the unknowns, left
		is.Equal(report.Turns.Actions[turnframe.ActionRestartInterpretation], received) // the received ones
		is.Equal(report.Turns.Actions[turnframe.ActionResumeCommands], 1)               // and the planned one
		is.Equal(report.Count(turnframe.PolicyLeft), len(stuck))                        // each unknown met, and left
		is.Equal(h.h.callsOf("k-book"), 1)                                              // which ran
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted)        // and committed
		is.Equal(rtPhase(t, store, planned), turnframe.PhaseCommitted)
		for _, turn := range stuck {
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseDelivered) // the stuck ones untouched
		}
	})
}

// A command that never ran in a turn that was abandoned is run by the next
// turn that plans it, never lost silently (issue 12, item 12).
func TestANewTurnAdoptsTheCommandAnAbandonedTurnNeverRan(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		first := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		is.NoErr(rt.Abandon(ctx, rtAccount, first, "user.left")) // planned, never executed

		second, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book it after all")
		is.NoErr(err)
		planned, err := rt.Plan(ctx, rtAccount, second, turnframe.Plan{Commands: []turnframe.Command{
			rtCmd("k-seat", "flight/7", "bump"), rtCmd("k-book", "flight/7", "book"),
		}})
		is.NoErr(err)
		is.Equal(planned.Admissions[1].Entry.Turn, second)                   // adopted
		is.Equal(planned.Admissions[1].Kind, turnframe.AdoptedFromAbandoned) // and Plan says so
		h := rtNewHandler(rtScript)
		report, err := rt.Execute(ctx, rtAccount, second, h)
		is.NoErr(err)
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultCommitted, turnframe.ResultCommitted}) // in plan order
		is.Equal(h.callsOf("k-book"), 1)                                                                        // it ran, once
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"})
		left, err := store.ForTurn(ctx, rtAccount, first)
		is.NoErr(err)
		is.Equal(len(left), 0) // the abandoned turn holds it no more
	})
}

// An attempt running when its turn is abandoned, whose process then dies
// before it settles, is not hidden: once its lease ended recovery lists the
// turn and asks for a reconciliation, which settles the entry (found by the
// crash harness's abandon fault).
func TestRecoveryReachesAnAttemptStrandedOnAnAbandonedTurn(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx, crash := context.WithCancel(context.Background())
		defer crash()
		charged := make(chan struct{})
		rt := turnframe.New(store)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		h := turnframe.HandlerFunc(func(hctx context.Context, _ turnframe.Call) turnframe.Outcome {
			close(charged) // the remote has it now
			<-hctx.Done()
			return turnframe.Unknown("")
		})
		done := make(chan error, 1)
		go func() {
			_, err := rt.Execute(ctx, rtAccount, turn, h)
			done <- err
		}()
		<-charged
		is.NoErr(turnframe.New(store).Abandon(context.Background(), rtAccount, turn, "user.left")) // given up meanwhile
		crash()                                                                                    // and the process dies
		is.True(errors.Is(<-done, context.Canceled))
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalExecuting) // left running

		decided, err := turnframe.NewRecovery(store).Decide(context.Background(), rtAccount, turn)
		is.NoErr(err)
		is.Equal(decided.Kind, turnframe.ActionNothing) // while its lease runs, the attempt may still settle
		later := turnframe.NewRecovery(store, rtAfterLeases())
		markers, err := later.Unfinished(context.Background(), turnframe.RecoveryScope{}, 10)
		is.NoErr(err)
		is.Equal(len(markers), 1) // listed for recovery
		decided, err = later.Decide(context.Background(), rtAccount, turn)
		is.NoErr(err)
		is.Equal(decided.Kind, turnframe.ActionReconcileExternal) // its outcome is unknown
		is.Equal(recKeys(decided.Entries), []turnframe.IdempotencyKey{"k-charge"})
		subject := turnframe.JournalSubject(rtAccount, "k-charge")
		err = later.Settle(context.Background(), subject, turnframe.Decision{Verdict: turnframe.VerdictResend})
		is.True(errors.Is(err, turnframe.ErrConflict)) // never resent: the turn is abandoned
		err = turnframe.NewRecovery(store).Settle(context.Background(), subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		is.True(errors.Is(err, turnframe.ErrConflict)) // nor settled while its lease may still run
		is.NoErr(later.Settle(context.Background(), subject, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:alice"}))
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)      // settled as the remote says
		is.Equal(histLastMove(t, store, subject), "executing>committed operator:alice") // by whom (a late answer may still add evidence)
		markers, err = later.Unfinished(context.Background(), turnframe.RecoveryScope{}, 10)
		is.NoErr(err)
		is.Equal(len(markers), 0) // finished
	})
}

// rtSlowAfterTake is a store whose process stalls right after the first
// write that moves an entry to Executing (the take): advance moves the
// clock on before Execute goes on.
type rtSlowAfterTake struct {
	turnframe.Store
	once    sync.Once
	advance func()
}

func (s *rtSlowAfterTake) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	a, err := s.Store.Apply(ctx, w)
	if err == nil && len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting {
		s.once.Do(s.advance)
	}
	return a, err
}

// A handler is never called under a lease that would end before its
// deadline: a process slow between the take and the call renews the lease
// first, so no other process may take the command over while it runs.
func TestExecuteRenewsALeaseTheHandlerWouldOutlive(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		var mu sync.Mutex
		now := time.Now().UTC()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		const timeout, margin = time.Minute, time.Second
		slow := &rtSlowAfterTake{Store: store, advance: func() { mu.Lock(); now = now.Add(2 * margin); mu.Unlock() }}
		rt := turnframe.New(slow, turnframe.WithClock(clock), turnframe.WithCommandTimeout(timeout), turnframe.WithLeaseMargin(margin))
		turn := rtPlanned(t, turnframe.New(store, turnframe.WithClock(clock)), rtAccount, rtCmd("k-book", "flight/7", "book"))
		var held time.Time
		h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
			held = rtEntry(t, store, call.Command.Key).LeaseUntil
			return rtScript(ctx, call, 1)
		})
		_, err := rt.Execute(context.Background(), rtAccount, turn, h)
		is.NoErr(err)
		is.True(!held.Before(clock().Add(timeout))) // held for the whole call when the handler began
	})
}

// rtRefusedTake is a store whose clock moves on right after it refuses a
// take (a write moving an entry to Executing): the lease the store judged
// still running has ended by the time Execute reads the entry again, as
// when the read lands just after the lease's end, or when the store
// measures leases on a clock of its own (pgstore.DatabaseClock).
// before, if set, runs just before the take is written.
type rtRefusedTake struct {
	turnframe.Store
	before, advance func()
}

func (s *rtRefusedTake) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	take := len(w.Settle) == 1 && w.Settle[0].To == turnframe.JournalExecuting
	if take && s.before != nil {
		s.before()
	}
	a, err := s.Store.Apply(ctx, w)
	if take && errors.Is(err, turnframe.ErrConflict) && s.advance != nil {
		s.advance()
	}
	return a, err
}

// A take the store refuses because the holder's lease still runs, read
// again after the lease ended on this runtime's clock, is the command in
// flight elsewhere, not an error: the store's judgement of the lease wins,
// nothing runs here, and the holder's outcome lands. On an abandoned turn
// the same refusal stays an error.
func TestATakeRefusedAsTheLeaseEndsIsInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		clock := newStepClock(t0)
		const timeout, margin = time.Minute, time.Second
		opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(timeout), turnframe.WithLeaseMargin(margin)}
		holder := turnframe.New(store, opts...)
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Commit(nil))
		end := rtEntry(t, store, "k-book").LeaseUntil
		is.Equal(end, t0.Add(timeout+margin)) // the holder's lease

		clock.set(end.Add(-time.Microsecond)) // the store refuses the take: the lease runs
		late := &rtRefusedTake{Store: store, advance: func() { clock.set(end.Add(time.Microsecond)) }}
		ran := false
		report, err := turnframe.New(late, opts...).Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				ran = true
				return rtScript(ctx, call, 1)
			}))
		is.NoErr(err)                                              // not an error
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // in flight elsewhere
		is.True(!ran)                                              // and not run here

		_, err = finish()
		is.NoErr(err)                                                            // the holder's Execute
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // its outcome landed
		is.Equal(rtEntry(t, store, "k-book").Attempts, 1)                        // run once

		// The turn abandoned between Execute's read and its take, the
		// holder's lease ended on every clock: the refusal is an error.
		turn = rtPlanned(t, holder, rtAccount, rtCmd("k-seat", "flight/8", "seat"))
		clock.set(t0)
		finish = rtHeld(t, holder, turn, "k-seat", turnframe.Commit(nil))
		clock.set(rtEntry(t, store, "k-seat").LeaseUntil.Add(time.Microsecond))
		abandoning := &rtRefusedTake{Store: store, before: func() { is.NoErr(holder.Abandon(context.Background(), rtAccount, turn, "gone")) }}
		_, err = turnframe.New(abandoning, opts...).Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome { return rtScript(ctx, call, 1) }))
		is.True(errors.Is(err, turnframe.ErrConflict)) // an abandoned turn's command is not in flight: it never runs
		_, err = finish()
		is.NoErr(err) // the holder still records its outcome
	})
}

// rtStoreClock is a store that measures every write on a clock of its own,
// as pgstore does on the database's: a Write's Now is replaced by it.
type rtStoreClock struct {
	turnframe.Store
	now func() time.Time
}

func (s *rtStoreClock) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	w.Now = s.now()
	return s.Store.Apply(ctx, w)
}

// A command whose Remote forbids a blind rerun, held by an attempt whose
// lease has ended on this runtime's clock but not on the store's: the
// store refuses to declare it unknown, and Execute reports it in flight
// and stops there — the turn's next command does not run before it.
func TestADeclarationRefusedWhileTheLeaseRunsIsInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(time.Minute),
			turnframe.WithLeaseMargin(time.Second), turnframe.WithCommand("book", turnframe.Remote{})} // can do neither: no blind rerun
		holder := turnframe.New(store, opts...)
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-mail", "mail/7", "mail"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Commit(nil))
		end := rtEntry(t, store, "k-book").LeaseUntil
		clock.set(end.Add(time.Microsecond))                                                                      // this runtime: the lease ended
		onItsOwnClock := &rtStoreClock{Store: store, now: func() time.Time { return end.Add(-time.Microsecond) }} // the store: it runs
		var ran []turnframe.IdempotencyKey
		report, err := turnframe.New(onItsOwnClock, opts...).Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				ran = append(ran, call.Command.Key)
				return rtScript(ctx, call, 1)
			}))
		is.NoErr(err)                                                            // not an error
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight)               // in flight on the store's clock
		is.Equal(report.Results[1].Kind, turnframe.ResultPending)                // the next command waits
		is.Equal(len(ran), 0)                                                    // nothing ran here
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // not declared unknown
		is.Equal(rtEntry(t, store, "k-mail").Status, turnframe.JournalPending)   // not run ahead of it

		_, err = finish()
		is.NoErr(err)                                                            // the holder's Execute
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // its outcome landed
	})
}

// The mirror of the case above, which the pgstore crash harness met: the
// lease still runs on this runtime's clock and has ended on the store's.
// A take sent then was granted by the store, and the dead-looking attempt
// was taken over and its handler run again at a remote that can do
// neither: a charge made twice. Execute now never asks for the take of an
// entry whose Remote forbids a blind rerun; it reports it in flight, and
// the holder's outcome lands.
func TestATakeOverTheStoreWouldGrantOnItsClockIsNeverAskedForANoRerunRemote(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		opts := func(clock *stepClock) []turnframe.Option {
			return []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithCommandTimeout(time.Minute),
				turnframe.WithLeaseMargin(time.Second), turnframe.WithCommand("book", turnframe.Remote{})} // can do neither
		}
		holder := turnframe.New(store, opts(newStepClock(t0))...) // its keeper sees its lease far from its end
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Commit(nil))
		held := rtEntry(t, store, "k-book")
		end := held.LeaseUntil

		late := newStepClock(end.Add(-time.Microsecond))                                                         // this runtime: the lease runs
		onItsOwnClock := &rtStoreClock{Store: store, now: func() time.Time { return end.Add(time.Microsecond) }} // the store: it ended
		ran := 0
		report, err := turnframe.New(onItsOwnClock, opts(late)...).Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				ran++
				return rtScript(ctx, call, 1)
			}))
		is.NoErr(err)
		is.Equal(ran, 0)                                                         // never run beside, or after, the holder
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight)               // in flight on this runtime's clock
		is.Equal(rtEntry(t, store, "k-book").Attempt, held.Attempt)              // not taken over
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // and not declared unknown either

		_, err = finish()
		is.NoErr(err)                                                            // the holder's Execute
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // its outcome landed
		is.Equal(rtEntry(t, store, "k-book").Attempts, 1)                        // run once
	})
}

// rtTakes records the From of every take (a settlement to Executing
// under a new attempt) it forwards.
type rtTakes struct {
	turnframe.Store
	from map[turnframe.IdempotencyKey]turnframe.JournalStatus
}

func (s *rtTakes) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	for _, st := range w.Settle {
		if st.To == turnframe.JournalExecuting && st.Attempt != st.Prior {
			s.from[st.Key] = st.From
		}
	}
	return s.Store.Apply(ctx, w)
}

// The rule of the test above holds in the store's transaction too, not
// only in the runtime's judgement: a take of a command whose Remote
// forbids a blind rerun is fenced on Pending (Settlement.From), which the
// store refuses for an entry another attempt holds, live or dead (storetest
// ATakeFencedOnPendingNeverTakesOverAnAttempt). A command whose Remote
// allows a rerun is not fenced: its dead attempt may be taken over.
func TestATakeOfANoRerunCommandIsFencedOnPendingInTheStore(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		takes := &rtTakes{Store: store, from: map[turnframe.IdempotencyKey]turnframe.JournalStatus{}}
		rt := turnframe.New(takes, turnframe.WithCommand("book", turnframe.Remote{}),
			turnframe.WithCommand("mail", turnframe.Remote{Deduplicates: time.Hour, Resends: 1}))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-mail", "mail/7", "mail"), rtCmd("k-seat", "seat/7", "seat"))
		_, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(func(ctx context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			return turnframe.Commit(nil)
		}))
		is.NoErr(err)
		is.Equal(takes.from["k-book"], turnframe.JournalPending)   // can do neither: fenced
		is.Equal(takes.from["k-mail"], turnframe.JournalStatus(0)) // deduplicates, resends left: a take-over allowed
		is.Equal(takes.from["k-seat"], turnframe.JournalStatus(0)) // undeclared: as before policies
	})
}

// rtAdoptOnSettle is a store that, when a reconciliation settles key,
// first lets a new turn's plan adopt the entry from its abandoned turn:
// the race between an operator's settle and the user's next message.
type rtAdoptOnSettle struct {
	turnframe.Store
	t   *testing.T
	key turnframe.IdempotencyKey
	cmd turnframe.Command
}

func (s *rtAdoptOnSettle) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].Attempt.IsZero() {
		rtPlanned(s.t, turnframe.New(s.Store, rtAfterLeases()), w.Account, s.cmd) // adopts it, its lease having ended
	}
	return s.Store.Apply(ctx, w)
}

// A stranded entry that a new turn adopts while an operator settles it:
// the settle is refused as the conflict it is, not reported ErrNotFound
// for an entry that exists, and nothing is written.
func TestSettlingAnEntryANewTurnAdoptsMeanwhileIsAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		cmd := rtCmd("k-charge", "card/1", "charge")
		turn := rtStranded(t, store, cmd)

		racing := &rtAdoptOnSettle{Store: store, t: t, key: "k-charge", cmd: cmd}
		err := turnframe.NewRecovery(racing, rtAfterLeases()).Settle(context.Background(), turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:alice"})
		is.True(errors.Is(err, turnframe.ErrConflict))                             // the entry moved under the settle
		is.True(!errors.Is(err, turnframe.ErrNotFound))                            // it exists
		is.True(rtEntry(t, store, "k-charge").Turn != turn)                        // adopted
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalExecuting) // and not settled by the refused write
	})
}
