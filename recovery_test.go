package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The recovery tests build every state with the real Runtime, never by
// writing rows by hand: what recovery reads is what a crash really leaves.

const recText = "done. why the loyalty number?"

// recReceived receives a turn with recText and plans cmds with an
// understanding whose one question is bytes 6–29 of the text, unless cmds is
// nil, in which case the turn stops after Receive.
func recReceived(t *testing.T, rt *turnframe.Runtime, cmds []turnframe.Command) turnframe.TurnID {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx := context.Background()
	turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), recText)
	is.NoErr(err) // receive
	if cmds == nil {
		return turn
	}
	_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{
		LoadedCases: []turnframe.CaseKey{"booking/42"},
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{
			Unit: 2, Words: turnframe.WordRange{First: 1, Last: 4, Start: 6, End: 29},
			Basis: turnframe.BasisCommittedStateAfterTurn,
		}}},
		Commands: cmds,
	})
	is.NoErr(err) // plan
	return turn
}

func recKeys(entries []turnframe.JournalEntry) []turnframe.IdempotencyKey {
	var keys []turnframe.IdempotencyKey
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	return keys
}

// recCrashMidExecute executes turn until the handler of key is running, then
// ends the caller's context as a crash would end the process: the entry is
// left Executing. The handler stays blocked until the test ends, as a call
// cut off by a crash never answers.
func recCrashMidExecute(t *testing.T, rt *turnframe.Runtime, turn turnframe.TurnID, key turnframe.IdempotencyKey) {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	h := turnframe.HandlerFunc(func(hctx context.Context, call turnframe.Call) turnframe.Outcome {
		if call.Command.Key == key {
			cancel()
			<-never
		}
		return rtScript(hctx, call, 1)
	})
	_, err := rt.Execute(ctx, rtAccount, turn, h)
	is.True(errors.Is(err, context.Canceled)) // the "crash" cut the turn short
}

// dataReads is a store that counts the reads of what a regeneration needs:
// events, replay records and stored turns (LoadTurn, text and all).
type dataReads struct {
	turnframe.Store
	n atomic.Int64
}

func (s *dataReads) EventsByID(ctx context.Context, account turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
	s.n.Add(1)
	return s.Store.EventsByID(ctx, account, ids)
}

func (s *dataReads) Replay(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.ReplayRecord, error) {
	s.n.Add(1)
	return s.Store.Replay(ctx, account, turn)
}

func (s *dataReads) LoadTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	s.n.Add(1)
	return s.Store.LoadTurn(ctx, account, turn)
}

func TestRecoveryDecidesInTheSafeOrder(t *testing.T) {
	book := rtCmd("k-book", "booking/42", "book")
	bump := rtCmd("k-bump", "booking/42", "bump")
	charge := rtCmd("k-charge", "booking/42", "charge")
	refuse := rtCmd("k-refuse", "booking/42", "refuse")
	handler := rtNewHandler(rtScript)
	ctx := context.Background()
	cases := []struct {
		name      string
		build     func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID
		want      turnframe.ActionKind
		phase     turnframe.TurnPhase
		entries   []turnframe.IdempotencyKey // ResumeCommands, ReconcileExternal
		events    int                        // RegenerateResponse
		questions []string                   // RegenerateResponse
	}{
		{
			name: "CrashedAfterReceiveRestartsInterpretation",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				return recReceived(t, rt, nil)
			},
			want: turnframe.ActionRestartInterpretation, phase: turnframe.PhaseReceived,
		},
		{
			name: "PlannedWithNothingToAdmitRegeneratesItsAnswerNotItsPlan",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				return recReceived(t, rt, []turnframe.Command{})
			},
			want: turnframe.ActionRegenerateResponse, phase: turnframe.PhasePlanned,
			events: 0, questions: []string{"why the loyalty number?"},
		},
		{
			name: "CrashedAfterPlanResumesEntriesInAdmissionOrder",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				return recReceived(t, rt, []turnframe.Command{bump, book})
			},
			want: turnframe.ActionResumeCommands, phase: turnframe.PhasePlanned,
			entries: []turnframe.IdempotencyKey{"k-bump", "k-book"},
		},
		{
			name: "CrashedMidExecuteResumesTheExecutingEntry",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{bump, book})
				recCrashMidExecute(t, rt, turn, "k-book")
				return turn
			},
			want: turnframe.ActionResumeCommands, phase: turnframe.PhaseExecuting,
			entries: []turnframe.IdempotencyKey{"k-book"},
		},
		{
			name: "CrashedAfterCommitRegeneratesFromEventsAndTasks",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{bump, book})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				return turn
			},
			want: turnframe.ActionRegenerateResponse, phase: turnframe.PhaseCommitted,
			events: 2, questions: []string{"why the loyalty number?"},
		},
		{
			name: "RejectedOnlyRegenerates",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{refuse})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				return turn
			},
			want: turnframe.ActionRegenerateResponse, phase: turnframe.PhaseCommitted,
			events: 0, questions: []string{"why the loyalty number?"},
		},
		{
			name: "DeliveredNeedsNothing",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{book})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				is.New(t).NoErr(rt.Deliver(ctx, rtAccount, turn, "booked"))
				return turn
			},
			want: turnframe.ActionNothing, phase: turnframe.PhaseDelivered,
		},
		{
			name: "DeliveredWithAnEntryPutBackToResendResumesIt",
			build: func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{book, charge})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				is.New(t).NoErr(rt.Deliver(ctx, rtAccount, turn, "we are verifying your payment"))
				is.New(t).NoErr(turnframe.NewRecovery(store).Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
					turnframe.Decision{Verdict: turnframe.VerdictResend}))
				return turn // and the process crashes before it executes the resend
			},
			want: turnframe.ActionResumeCommands, phase: turnframe.PhaseDelivered,
			entries: []turnframe.IdempotencyKey{"k-charge"},
		},
		{
			name: "AbandonedWithAPendingEntryNeedsNothing",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{book})
				is.New(t).NoErr(rt.Abandon(ctx, rtAccount, turn, "user_left"))
				return turn
			},
			want: turnframe.ActionNothing, phase: turnframe.PhaseAbandoned,
		},
		{
			name: "DeliveredWithAnUnknownEntryIsReconciledFirst",
			build: func(t *testing.T, _ turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{book, charge})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				is.New(t).NoErr(rt.Deliver(ctx, rtAccount, turn, "we are verifying your payment"))
				return turn
			},
			want: turnframe.ActionReconcileExternal, phase: turnframe.PhaseDelivered,
			entries: []turnframe.IdempotencyKey{"k-charge"},
		},
		{
			name: "AnEntryThatNeedsInterventionIsReconciledFirst",
			build: func(t *testing.T, store turnframe.Store, rt *turnframe.Runtime) turnframe.TurnID {
				turn := recReceived(t, rt, []turnframe.Command{charge, book})
				_, err := rt.Execute(ctx, rtAccount, turn, handler)
				is.New(t).NoErr(err) // execute
				is.New(t).NoErr(turnframe.NewRecovery(store).Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
					turnframe.Decision{Verdict: turnframe.VerdictEscalate, Code: "ops.look"})) // a person must look
				return turn
			},
			want: turnframe.ActionReconcileExternal, phase: turnframe.PhaseCommitted,
			entries: []turnframe.IdempotencyKey{"k-charge"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				turn := c.build(t, store, turnframe.New(store))
				// A new process: a new Runtime and a new Recovery over the same store.
				rec := &recorder{}
				action, err := turnframe.NewRecovery(store, turnframe.WithObserver(rec)).Decide(ctx, rtAccount, turn)
				is.NoErr(err) // decide
				is.Equal(action.Kind, c.want)
				is.Equal(action.Phase, c.phase)
				is.Equal(action.MayCauseEffects(), c.want == turnframe.ActionResumeCommands)
				is.Equal(rec.labels(turnframe.SignalRecoveryDecided), []turnframe.Labels{{Action: c.want.String()}})
				if c.entries != nil {
					is.Equal(recKeys(action.Entries), c.entries)
				}
				if c.want == turnframe.ActionReconcileExternal {
					is.Equal(len(action.Attempts), len(action.Entries)) // one attempt per unknown entry
					is.True(!action.Attempts[0].IsZero())
				}
				// Triage decides the same from the same reads, and reads
				// nothing a regeneration needs.
				reads := &dataReads{Store: store}
				triaged, err := turnframe.NewRecovery(reads).Triage(ctx, rtAccount, turn)
				is.NoErr(err) // triage
				is.Equal(triaged.Kind, action.Kind)
				is.Equal(triaged.Phase, action.Phase)
				is.Equal(recKeys(triaged.Entries), recKeys(action.Entries))
				is.Equal(triaged.Attempts, action.Attempts)
				is.Equal(recKeys(triaged.Awaiting), recKeys(action.Awaiting))
				is.Equal(len(triaged.Events)+len(triaged.AnswerTasks), 0) // no answer's material
				is.Equal(reads.n.Load(), int64(0))                        // no event, replay record or turn text read
				if c.want == turnframe.ActionRegenerateResponse {
					is.Equal(len(action.Events), c.events)
					for i := 1; i < len(action.Events); i++ {
						is.True(action.Events[i-1].Revision < action.Events[i].Revision) // append order
					}
					var questions []string
					for _, task := range action.AnswerTasks {
						questions = append(questions, task.Question)
						is.Equal(task.Basis, turnframe.BasisCurrentCommittedState)
					}
					is.Equal(questions, c.questions)
				}
			})
		})
	}
}

func TestRecoveryResumeCommitsEachCommandOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		cmds := []turnframe.Command{rtCmd("k1", "booking/1", "book"), rtCmd("k2", "booking/2", "book"), rtCmd("k3", "booking/3", "notify")}
		turn := recReceived(t, turnframe.New(store), cmds)
		recCrashMidExecute(t, turnframe.New(store), turn, "k2") // k1 committed, k2 executing, k3 pending

		action, err := turnframe.NewRecovery(store).Decide(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(action.Kind, turnframe.ActionResumeCommands)
		is.Equal(recKeys(action.Entries), []turnframe.IdempotencyKey{"k2", "k3"})

		h := rtNewHandler(rtScript)
		report, err := turnframe.New(store, rtAfterLeases()).Execute(ctx, rtAccount, turn, h)
		is.NoErr(err) // resume through Execute, once the crashed attempt's lease ended
		is.Equal(report.Phase, turnframe.PhaseCommitted)
		is.Equal(h.callsOf("k1"), 0) // settled before the crash: not run again (I14)
		is.Equal(h.callsOf("k2"), 1)
		is.Equal(h.callsOf("k3"), 1)
		is.Equal(rtEventsByKey(t, store, rtAccount, "booking/1", "booking/2", "booking/3"),
			map[turnframe.IdempotencyKey]int{"k1": 1, "k2": 1, "k3": 1}) // each command committed once
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k1", "k2", "k3~1", "k3~2"})

		action, err = turnframe.NewRecovery(store).Decide(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(action.Kind, turnframe.ActionRegenerateResponse) // now only the answer is missing
	})
}

func TestRecoveryKeepsTenantsApart(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		turn := recReceived(t, turnframe.New(store), []turnframe.Command{rtCmd("k1", "booking/1", "book")})
		r := turnframe.NewRecovery(store)
		_, err := r.Decide(ctx, rtOther, turn)
		is.True(errors.Is(err, turnframe.ErrNotFound)) // another tenant's turn reads as missing
		_, err = r.StoredTurn(ctx, rtOther, turn)
		is.True(errors.Is(err, turnframe.ErrNotFound))
		record, err := r.Record(ctx, rtOther, turn)
		is.NoErr(err)
		is.True(record == nil) // absent, like a turn that crashed before its record
		listed, err := r.Unfinished(ctx, turnframe.RecoveryScope{Account: rtOther}, 10)
		is.NoErr(err)
		is.Equal(len(listed), 0)
	})
}

func TestRecoveryReadsWhatRegenerationNeeds(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		r := turnframe.NewRecovery(store)
		bare := recReceived(t, rt, nil)
		record, err := r.Record(ctx, rtAccount, bare)
		is.NoErr(err)
		is.True(record == nil) // no record yet is not an error
		turn := recReceived(t, rt, []turnframe.Command{rtCmd("k1", "booking/42", "bump"), rtCmd("k2", "booking/42", "bump")})
		_, err = rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)
		record, err = r.Record(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(record.LoadedCases, []turnframe.CaseKey{"booking/42"})
		stored, err := r.StoredTurn(ctx, rtAccount, turn)
		is.NoErr(err)
		is.Equal(stored.Text, recText)
		events, err := r.CaseEvents(ctx, rtAccount, "booking/42", 1)
		is.NoErr(err)
		is.Equal(len(events), 1) // only what came after revision 1
		is.Equal(events[0].Revision, turnframe.CaseRevision(2))
	})
}

// recHandler is a RecoveryHandler that records what it was asked to do and
// fails for the turns in fail.
type recHandler struct {
	mu    sync.Mutex
	calls map[turnframe.ActionKind][]turnframe.TurnID
	fail  map[turnframe.TurnID]bool
	act   func(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error
}

func (h *recHandler) record(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	h.mu.Lock()
	if h.calls == nil {
		h.calls = make(map[turnframe.ActionKind][]turnframe.TurnID)
	}
	h.calls[a.Kind] = append(h.calls[a.Kind], m.Turn)
	fail := h.fail[m.Turn]
	h.mu.Unlock()
	if fail {
		return fmt.Errorf("the application could not act on turn %v", m.Turn)
	}
	if h.act != nil {
		return h.act(ctx, m, a)
	}
	return nil
}

func (h *recHandler) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	return h.record(ctx, m, a)
}

func (h *recHandler) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	return h.record(ctx, m, a)
}

func (h *recHandler) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	return h.record(ctx, m, a)
}

func TestRecoveryRecover(t *testing.T) {
	ctx := context.Background()
	t.Run("ContinuesPastAFailingTurn", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			rt := turnframe.New(store)
			first := recReceived(t, rt, nil)
			second := recReceived(t, rt, []turnframe.Command{rtCmd("k1", "booking/1", "book")})
			third := recReceived(t, rt, nil)
			h := &recHandler{fail: map[turnframe.TurnID]bool{first: true}}
			report, err := turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{}, h)
			is.NoErr(err) // one turn's failure is not the recovery's
			is.Equal(report.Turns.Turns, 3)
			is.Equal(len(report.Turns.Failures), 1)
			is.Equal(report.Turns.Failures[0].Turn, first)
			is.Equal(report.Turns.Failures[0].Action, turnframe.ActionRestartInterpretation)
			is.True(report.Turns.Failures[0].Err != nil)
			is.Equal(h.calls[turnframe.ActionRestartInterpretation], []turnframe.TurnID{first, third}) // oldest first, and on past the failure
			is.Equal(h.calls[turnframe.ActionResumeCommands], []turnframe.TurnID{second})
			is.Equal(report.Turns.Actions, map[turnframe.ActionKind]int{turnframe.ActionRestartInterpretation: 2, turnframe.ActionResumeCommands: 1})
		})
	})
	// A delivered turn holding an unknown entry is not finished for
	// recovery. Its command's Remote decides what becomes of the entry: one
	// that can be asked settles it and the turn is finished; with none
	// declared the entry is left for Settle, and the handler is not called.
	reaches := []struct {
		name     string
		opts     []turnframe.Option
		outcome  turnframe.PolicyOutcome
		action   turnframe.ActionKind // decided after the policy
		status   turnframe.JournalStatus
		ref      string // the entry's remote reference after
		listed   int    // turns a second Recover still lists
		lastMove string
	}{
		{"with a Verifier the policy settles it",
			[]turnframe.Option{turnframe.WithCommand("charge", turnframe.Remote{Verifier: turnframe.VerifierFunc(
				func(_ context.Context, u turnframe.Uncertain) turnframe.Verification {
					if u.Key != "k-charge" || u.RemoteRef != "ref-k-charge" {
						return turnframe.Verification{} // asked about something else: cannot tell
					}
					return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ch_1"}
				})})},
			turnframe.PolicyCompleted, turnframe.ActionNothing, turnframe.JournalCommitted, "ch_1", 0,
			"outcome_unknown>committed policy"},
		{"with no Remote declared it is left for Settle", nil,
			turnframe.PolicyLeft, turnframe.ActionReconcileExternal, turnframe.JournalOutcomeUnknown, "ref-k-charge", 1,
			"executing>outcome_unknown app"},
	}
	for _, tt := range reaches {
		t.Run("ReachesADeliveredTurnHoldingAnUnknownEntry/"+tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store)
				turn := recReceived(t, rt, []turnframe.Command{rtCmd("k-charge", "booking/1", "charge")})
				_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
				is.NoErr(err)
				is.NoErr(rt.Deliver(ctx, rtAccount, turn, "we are verifying your payment"))
				done := recReceived(t, rt, []turnframe.Command{rtCmd("k-book", "booking/2", "book")})
				_, err = rt.Execute(ctx, rtAccount, done, rtNewHandler(rtScript))
				is.NoErr(err)
				is.NoErr(rt.Deliver(ctx, rtAccount, done, "booked"))

				h := &recHandler{}
				r := turnframe.NewRecovery(store, tt.opts...)
				report, err := r.Recover(ctx, turnframe.RecoveryScope{}, h)
				is.NoErr(err)
				is.Equal(report.Turns.Turns, 1)                                            // the delivered turn is not finished for recovery; the truly finished one is not listed
				is.Equal(report.Turns.Actions, map[turnframe.ActionKind]int{tt.action: 1}) // decided again after the policy
				is.Equal(len(h.calls), 0)                                                  // nothing for the handler
				is.Equal(policyFor(t, report, turnframe.JournalSubject(rtAccount, "k-charge")).Outcome, tt.outcome)
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, tt.status)                                                                                // settled, or left
				is.Equal(e.RemoteRef, tt.ref)                                                                                // with the remote's reference
				is.True(strings.HasPrefix(histLast(t, store, turnframe.JournalSubject(rtAccount, "k-charge")), tt.lastMove)) // by whom

				report, err = r.Recover(ctx, turnframe.RecoveryScope{}, h)
				is.NoErr(err)
				is.Equal(report.Turns.Turns, tt.listed) // settled: nothing left; left: still listed
			})
		})
	}
	t.Run("LeavesTurnsInFlightAloneWithACutOff", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			clock := t0
			rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return clock }))
			stale := recReceived(t, rt, nil)
			clock = clock.Add(time.Hour)
			recReceived(t, rt, nil) // in flight: updated after the cut-off
			h := &recHandler{}
			report, err := turnframe.NewRecovery(store).Recover(ctx, turnframe.RecoveryScope{UpdatedBefore: t0.Add(time.Minute)}, h)
			is.NoErr(err)
			is.Equal(report.Turns.Turns, 1)
			is.Equal(h.calls[turnframe.ActionRestartInterpretation], []turnframe.TurnID{stale})
		})
	})
	t.Run("RefusesANilHandlerOrABadScope", func(t *testing.T) {
		is := is.New(t)
		r := turnframe.NewRecovery(nopStoreForSweep{}) // input checks come first
		_, err := r.Recover(ctx, turnframe.RecoveryScope{}, nil)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // a nil handler
		_, err = r.Recover(ctx, turnframe.RecoveryScope{Account: turnframe.AccountID(strings.Repeat("a", 129))}, &recHandler{})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // an account that is none
		_, err = r.Recover(ctx, turnframe.RecoveryScope{UpdatedBefore: time.Unix(0, 0)}, &recHandler{})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // a cut-off out of range
	})
	t.Run("RefusesABadTurnRef", func(t *testing.T) {
		is := is.New(t)
		r := turnframe.NewRecovery(nopStoreForSweep{})
		_, err := r.Decide(ctx, "", turnframe.NewIDGenerator().TurnID(t0))
		is.True(errors.Is(err, turnframe.ErrInvalid))
		_, err = r.Decide(ctx, rtAccount, turnframe.TurnID{})
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
}

// nopStoreForSweep is a Store that must never be called: input checks come
// first.
type nopStoreForSweep struct{ turnframe.Store }

// An expired claim is a send that may have left and got no answer: it is
// counted SignalExternalOutcomeUnknown, with its destination and
// CodeLeaseEnded, by Recover and by Run's release alike. Before, only its
// reconciliation was counted, so a metric of unknowns read fewer than the
// reconciliations.
func TestAnExpiredClaimIsCountedAsAnUnknownOutcome(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "parking"})
		claims, err := store.ClaimDue(ctx, dispNow, 10, "worker-dead", time.Second) // its process then dies, mid-send
		is.NoErr(err)
		is.Equal(len(claims), 1) // claimed

		obs := &recorder{}
		later := dispNow.Add(time.Minute)
		rec := turnframe.NewRecovery(store, turnframe.WithObserver(obs), turnframe.WithClock(func() time.Time { return later }),
			turnframe.WithDestination("parking", turnframe.Remote{Deduplicates: time.Hour}))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)
		is.Equal(len(report.Expired), 1) // the claim expired
		unknown := obs.labels(turnframe.SignalExternalOutcomeUnknown)
		is.Equal(len(unknown), 1)                                                                         // the expired send counted unknown
		is.Equal(unknown[0], turnframe.Labels{Destination: "parking", Outcome: turnframe.CodeLeaseEnded}) // with its destination
		is.True(obs.count(turnframe.SignalExternalReconciled) <= len(unknown))                            // nothing known that was not unknown
	})
}

// Recover declaring a dead attempt unknown counts it, as Execute's own
// declaration does: every unknown is counted where it became unknown, and
// a count of reconciliations never exceeds the count of unknowns.
func TestRecoverCountsADeadAttemptItDeclaresUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newChargeFixture(t, store)
		f.takeAndDie(t, store, turnframe.AttemptID{})
		f.clock.set(f.clock.read().Add(2 * time.Minute))

		recRecoverThenSettle(t, store, f.opts, turnframe.JournalNeedsIntervention)
		unknown, reconciled := f.obs.count(turnframe.SignalExternalOutcomeUnknown), f.obs.count(turnframe.SignalExternalReconciled)
		is.Equal(unknown, 1)           // the dead attempt's unknown is counted where it became unknown
		is.True(reconciled <= unknown) // a count of reconciliations never exceeds the count of unknowns
	})
}

// A policy's escalation (OutcomeUnknown → NeedsIntervention) leaves the
// outcome unknown: it is not counted as a reconciliation, and the person's
// settlement later is, once.
func TestAnEscalationIsNotCountedAsAReconciliation(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		obs := &recorder{}
		opts := []turnframe.Option{turnframe.WithObserver(obs),
			turnframe.WithCommand("charge", turnframe.Remote{}), turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			return turnframe.Unknown("ref-1")
		}))
		is.NoErr(err)
		recRecoverThenSettle(t, store, opts, turnframe.JournalNeedsIntervention)
		unknown, reconciled := obs.count(turnframe.SignalExternalOutcomeUnknown), obs.count(turnframe.SignalExternalReconciled)
		t.Logf("outcome_unknown=%d reconciled=%d (%v)", unknown, reconciled, obs.labels(turnframe.SignalExternalReconciled))
		is.True(reconciled <= unknown) // a count of reconciliations never exceeds the count of unknowns
	})
}

// An attempt left running on an abandoned turn that died (Stranded), with
// no Remote declared, is left by Recover, and a person settles it straight
// from Executing: its unknown, never declared, is counted then, so the
// reconciliation never outnumbers the unknowns.
func TestSettlingAStrandedEntryCountsItsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		obs := &recorder{}
		opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithObserver(obs),
			turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
		gen := turnframe.NewIDGenerator()
		_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.read(),
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalExecuting, Attempt: gen.AttemptID(clock.read()), Lease: time.Minute}}})
		is.NoErr(err) // an attempt took k-charge; its process died mid-call
		is.NoErr(rt.Abandon(ctx, rtAccount, turn, "user.left"))
		clock.set(clock.read().Add(2 * time.Minute)) // the lease ended: stranded

		recRecoverThenSettle(t, store, opts, turnframe.JournalExecuting)
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
		unknown, reconciled := obs.count(turnframe.SignalExternalOutcomeUnknown), obs.count(turnframe.SignalExternalReconciled)
		t.Logf("outcome_unknown=%d reconciled=%d", unknown, reconciled)
		is.True(reconciled <= unknown) // a count of reconciliations never exceeds the count of unknowns
	})
}

// recRecoverThenSettle runs one Recover pass over store with opts, checks
// that it leaves the entry "k-charge" in status before, and has a person
// settle it completed, as the counting tests above need.
func recRecoverThenSettle(t *testing.T, store turnframe.Store, opts []turnframe.Option, before turnframe.JournalStatus) {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx := context.Background()
	rec := turnframe.NewRecovery(store, opts...)
	_, err := rec.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
	is.NoErr(err)                                          // recover
	is.Equal(rtEntry(t, store, "k-charge").Status, before) // what the pass left
	is.NoErr(rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"),
		turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:ana"})) // settled by hand
}
