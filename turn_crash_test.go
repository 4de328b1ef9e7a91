package turnframe_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

var rtErrCrash = errors.New("rt: simulated crash")

// rtAfterLeases is the clock of a runtime that starts after a crash, once
// every lease the dead one held has ended.
func rtAfterLeases() turnframe.Option {
	return turnframe.WithClock(func() time.Time { return time.Now().Add(time.Hour) })
}

// rtCrashingStore lets the first `left` Applies through and refuses every
// later one, as a process that dies after its n-th transaction would: what
// came before is stored, nothing after is.
type rtCrashingStore struct {
	turnframe.Store
	mu   sync.Mutex
	left int
}

func (s *rtCrashingStore) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	s.mu.Lock()
	if s.left == 0 {
		s.mu.Unlock()
		return turnframe.Applied{}, rtErrCrash
	}
	s.left--
	s.mu.Unlock()
	return s.Store.Apply(ctx, w)
}

// rtDrive is an application's loop over one turn: receive it unless turn is
// given, plan it unless it is planned, execute it, deliver it unless it is
// delivered. It stops at the first error.
func rtDrive(ctx context.Context, rt *turnframe.Runtime, store turnframe.Store, turn turnframe.TurnID, h turnframe.Handler, cmds []turnframe.Command) (turnframe.TurnID, error) {
	if turn.IsZero() {
		var err error
		if turn, err = rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book, notify, charge"); err != nil {
			return turn, err
		}
	}
	m, err := store.TurnPhase(ctx, rtAccount, turn)
	if err != nil {
		return turn, err
	}
	if m.Phase < turnframe.PhasePlanned {
		if _, err := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: cmds}); err != nil {
			return turn, err
		}
	}
	if _, err := rt.Execute(ctx, rtAccount, turn, h); err != nil {
		return turn, err
	}
	if m.Phase != turnframe.PhaseDelivered {
		return turn, rt.Deliver(ctx, rtAccount, turn, "done")
	}
	return turn, nil
}

func TestRuntimeResumesAfterACrashBetweenAnyTwoWrites(t *testing.T) {
	cmds := []turnframe.Command{
		rtCmd("k-book", "flight/7", "book"),
		rtCmd("k-notify", "flight/7", "notify"),
		rtCmd("k-charge", "card/1", "charge"),
	}
	for _, cfg := range []struct {
		name  string
		local []string // commands declared local (WithLocalCommand)
		// points are where the first runtime dies: after how many Applies.
		points []struct {
			name    string
			applies int
		}
	}{
		// The whole turn is nine Applies: receive, plan, then two per
		// command (mark executing, settle), then deliver.
		{"every command taken", nil, []struct {
			name    string
			applies int
		}{
			{"after receive", 1},
			{"after plan", 2},
			{"after the first command is marked executing", 3},
			{"after the first command commits", 4},
			{"after the second command is marked executing", 5},
			{"after the second command commits", 6},
			{"after the third command is marked executing", 7},
			{"before deliver", 8},
		}},
		// book and notify make no outside call: seven Applies, one per
		// local command; charge calls out and is taken first.
		{"two local commands", []string{"book", "notify"}, []struct {
			name    string
			applies int
		}{
			{"after receive", 1},
			{"after plan, while the first command runs", 2},
			{"after the first command commits, while the second runs", 3},
			{"after the second command commits", 4},
			{"after the third command is marked executing", 5},
			{"before deliver", 6},
		}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			for _, p := range cfg.points {
				t.Run(p.name, func(t *testing.T) {
					eachStore(t, func(t *testing.T, store turnframe.Store) {
						rtCrashAndResume(t, store, cmds, cfg.local, p.applies)
					})
				})
			}
		})
	}
}

// rtCrashAndResume drives a turn of cmds through a runtime that dies after
// its applies-th write, then through a new one over the same store, and
// checks that every command took effect exactly once and the unknown one
// stayed unknown. local names the commands both runtimes declare local.
func rtCrashAndResume(t *testing.T, store turnframe.Store, cmds []turnframe.Command, local []string, applies int) {
	is := is.New(t)
	ctx := context.Background()
	isLocal := func(name string) bool { return slices.Contains(local, name) }
	before := rtNewHandler(rtScript)
	turn, err := rtDrive(ctx, turnframe.New(&rtCrashingStore{Store: store, left: applies}, turnframe.WithLocalCommand(local...)), store, turnframe.TurnID{}, before, cmds)
	is.True(errors.Is(err, rtErrCrash)) // the first runtime died
	left, err := store.ForTurn(ctx, rtAccount, turn)
	is.NoErr(err) // what the crash left

	after := rtNewHandler(rtScript)
	_, err = rtDrive(ctx, turnframe.New(store, rtAfterLeases(), turnframe.WithLocalCommand(local...)), store, turn, after, cmds)
	is.NoErr(err) // a new runtime over the same store finishes the turn

	is.Equal(rtPhase(t, store, turn), turnframe.PhaseDelivered) // delivered
	status := make(map[turnframe.IdempotencyKey]turnframe.JournalStatus)
	for _, e := range left {
		status[e.Key] = e.Status
	}
	for _, c := range cmds {
		switch st, admitted := status[c.Key]; {
		case admitted && st == turnframe.JournalPending && isLocal(c.Name):
			is.True(before.callsOf(c.Key) <= 1)   // it may have run, its commit lost with the crash
			is.Equal(after.callsOf(c.Key), 1)     // runs once more
			is.Equal(after.atts[c.Key], []int{1}) // as its first counted attempt
		case !admitted || st == turnframe.JournalPending:
			is.Equal(before.callsOf(c.Key), 0) // never started
			is.Equal(after.callsOf(c.Key), 1)  // runs once
		case st == turnframe.JournalExecuting:
			is.Equal(before.callsOf(c.Key), 1)    // the crashed attempt ran
			is.Equal(after.callsOf(c.Key), 1)     // and runs again under its key
			is.Equal(after.atts[c.Key], []int{2}) // as the second attempt
		default:
			is.Equal(before.callsOf(c.Key), 1) // ran once
			is.Equal(after.callsOf(c.Key), 0)  // settled or unknown: never again
		}
	}
	is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // unknown stays unknown
	is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7", "card/1"),
		map[turnframe.IdempotencyKey]int{"k-book": 1, "k-notify": 1}) // one commit per key
	is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book", "k-notify~1", "k-notify~2"}) // one set of rows per committed key

	// Once more, for good measure: nothing left to run.
	again := rtNewHandler(rtScript)
	report, err := turnframe.New(store, rtAfterLeases(), turnframe.WithLocalCommand(local...)).Execute(ctx, rtAccount, turn, again)
	is.NoErr(err)
	is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultSkipped, turnframe.ResultSkipped, turnframe.ResultUnknown})
	is.Equal(len(again.calls), 0) // nothing ran
}

func TestRuntimeRecordsAHandlerPastItsTimeoutAsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		release := make(chan struct{})
		finished := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
			defer close(finished)
			<-release // ignores its context on purpose
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "late"}}, turnframe.OutboxMessage{Destination: "late"})
		})
		rec := &recorder{}
		lateAnswers := rec.notify(turnframe.SignalLateAnswer)
		rt := turnframe.New(store, turnframe.WithCommandTimeout(20*time.Millisecond), turnframe.WithObserver(rec))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-slow", "flight/7", "book"))

		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err) // a timeout is an outcome, not an error
		res := report.Results[0]
		is.Equal(res.Kind, turnframe.ResultUnknown) // unknown
		is.True(res.Ran)                            // by this attempt
		e := rtEntry(t, store, "k-slow")
		is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // unknown in the journal
		is.Equal(e.Attempt, res.Attempt)                    // under the attempt that timed out
		is.True(!e.Attempt.IsZero())
		is.Equal(report.Phase, turnframe.PhaseCommitted) // unknown is not pending
		is.Equal(rec.labels(turnframe.SignalExternalOutcomeUnknown), []turnframe.Labels{{Command: "book", Outcome: "timeout"}})

		once.Do(func() { close(release) })
		<-finished                                                                    // the late answer was made, and nobody reads it
		is.Equal(awaitLabels(t, lateAnswers, "late answer").Outcome, "recorded")      // it is only kept as evidence
		is.Equal(rtEntry(t, store, "k-slow").Status, turnframe.JournalOutcomeUnknown) // still unknown
		is.Equal(len(evidenceOf(t, store, turnframe.JournalSubject(rtAccount, "k-slow"), turnframe.CodeLateAnswer)), 1)
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0) // the late commit was discarded
		is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)              // and sent nothing

		report, err = rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultUnknown) // reported
		is.True(!report.Results[0].Ran)                           // not run again (I15)
		is.Equal(h.callsOf("k-slow"), 1)                          // once, ever
	})
}

func TestRuntimeRecordsAPanickingHandlerAsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		var logs bytes.Buffer
		rec := &recorder{}
		rt := turnframe.New(store, turnframe.WithObserver(rec), turnframe.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-boom", "card/1", "charge"), rtCmd("k-book", "flight/7", "book"))
		h := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
			if call.Command.Key == "k-boom" {
				panic("card reader on fire")
			}
			return rtScript(ctx, call, n)
		})

		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err)                                                                                         // the panic does not escape
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultUnknown, turnframe.ResultCommitted}) // the panic is unknown; the turn goes on
		is.Equal(rtEntry(t, store, "k-boom").Status, turnframe.JournalOutcomeUnknown)
		is.True(strings.Contains(logs.String(), "card reader on fire")) // logged with the panic value
		is.Equal(rec.labels(turnframe.SignalExternalOutcomeUnknown), []turnframe.Labels{{Command: "charge", Outcome: "panic"}})
	})
}

func TestRuntimeEnqueuesOutboxRowsOnlyForCommittedCommands(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithMaxConflictRetries(0))
		turn := rtPlanned(t, rt, rtAccount,
			rtCmd("k-book", "flight/7", "book"),
			rtCmd("k-notify", "flight/8", "notify"),
			rtCmd("k-refuse", "flight/9", "refuse"),
			rtCmd("k-charge", "card/1", "charge"),
			rtCmd("k-moved", "flight/10", "moved"),
		)
		h := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
			if call.Command.Name != "moved" {
				return rtScript(ctx, call, n)
			}
			// Another turn commits to the same case while this one runs.
			other := turnframe.New(store)
			bump, err := other.Receive(ctx, rtAccount, other.NewConversationID(), "bump")
			if err == nil {
				_, err = other.Plan(ctx, rtAccount, bump, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-bump", call.Command.Case, "bump")}})
			}
			if err == nil {
				_, err = other.Execute(ctx, rtAccount, bump, rtNewHandler(rtScript))
			}
			if err != nil {
				return turnframe.Reject("rt: bump failed: " + err.Error())
			}
			return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "moved"}}, turnframe.OutboxMessage{Destination: "never"})
		})

		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(errors.Is(err, turnframe.ErrConflict)) // the case moved and no re-run is allowed
		is.Equal(rtKinds(report), []turnframe.ResultKind{
			turnframe.ResultCommitted, turnframe.ResultCommitted, turnframe.ResultRejected,
			turnframe.ResultUnknown, turnframe.ResultPending,
		})
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book", "k-notify~1", "k-notify~2"}) // rejected, unknown and conflicting commands have none
		is.Equal(len(report.Results[2].OutboxIDs)+len(report.Results[3].OutboxIDs)+len(report.Results[4].OutboxIDs), 0)
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7", "flight/8", "flight/9", "card/1", "flight/10"),
			map[turnframe.IdempotencyKey]int{"k-book": 1, "k-notify": 1, "k-bump": 1}) // events only for commits
	})
}

func TestRuntimeRerunsACommitWhoseCaseMoved(t *testing.T) {
	tests := []struct {
		name    string
		retries int
	}{
		{"with re-runs allowed, the second run commits on the new revision", turnframe.DefaultMaxConflictRetries},
		{"with no re-run allowed, it is a conflict and the entry stays pending", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				started := make(chan struct{})
				proceed := make(chan struct{})
				var once sync.Once
				t.Cleanup(func() { once.Do(func() { close(proceed) }) })
				hold := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					if n == 1 {
						close(started)
						<-proceed
					}
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "seat.held"}}, turnframe.OutboxMessage{Destination: "seats"})
				})
				a := turnframe.New(store, turnframe.WithMaxConflictRetries(tt.retries))
				b := turnframe.New(store)
				turnA := rtPlanned(t, a, rtAccount, rtCmd("a-hold", "flight/7", "hold"))
				turnB := rtPlanned(t, b, rtAccount, rtCmd("b-bump", "flight/7", "bump"))

				type result struct {
					report turnframe.ExecuteReport
					err    error
				}
				done := make(chan result, 1)
				go func() {
					r, err := a.Execute(ctx, rtAccount, turnA, hold)
					done <- result{r, err}
				}()
				select {
				case <-started:
				case r := <-done:
					t.Fatalf("runtime A returned before its handler started: %v", r.err)
				}
				_, err := b.Execute(ctx, rtAccount, turnB, rtNewHandler(rtScript))
				is.NoErr(err) // B commits to the case while A's handler runs
				once.Do(func() { close(proceed) })
				got := <-done

				if tt.retries > 0 {
					is.NoErr(got.err)                                                    // A committed
					is.Equal(got.report.Results[0].Kind, turnframe.ResultCommitted)      // on its second run
					is.Equal(hold.revisionsOf("a-hold"), []turnframe.CaseRevision{0, 1}) // with the new revision
					evs, err := store.EventsSince(ctx, rtAccount, "flight/7", 0, 10)
					is.NoErr(err)                                                            // events since
					is.Equal(len(evs), 2)                                                    // B's event, then A's
					is.Equal(evs[1].Key, turnframe.IdempotencyKey("a-hold"))                 // A's event last
					is.Equal(evs[1].Revision, turnframe.CaseRevision(2))                     // on revision 2
					is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"a-hold"})          // one row
					is.Equal(rtPhase(t, store, turnA), turnframe.PhaseCommitted)             // the turn committed
					is.Equal(rtEntry(t, store, "a-hold").Status, turnframe.JournalCommitted) // the entry committed
					return
				}
				is.True(errors.Is(got.err, turnframe.ErrConflict))                       // a conflict
				is.True(strings.Contains(got.err.Error(), "a-hold"))                     // naming the key
				is.Equal(got.report.Results[0].Kind, turnframe.ResultPending)            // reported pending
				is.Equal(rtEntry(t, store, "a-hold").Status, turnframe.JournalExecuting) // and pending in the journal
				is.Equal(hold.callsOf("a-hold"), 1)                                      // no re-run
				is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7"), map[turnframe.IdempotencyKey]int{"b-bump": 1})
				is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)          // nothing enqueued
				is.Equal(rtPhase(t, store, turnA), turnframe.PhaseExecuting) // the turn still executing

				// Once its lease ended, a later Execute resumes it by key,
				// under a new attempt.
				report, err := turnframe.New(store, rtAfterLeases()).Execute(ctx, rtAccount, turnA, hold)
				is.NoErr(err)
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)
				is.Equal(rtEntry(t, store, "a-hold").Attempts, 2)
				is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"a-hold"})
			})
		})
	}
}

func TestRuntimeLeavesTheEntryExecutingWhenTheCallersContextEnds(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rt := turnframe.New(store)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		h := rtNewHandler(func(context.Context, turnframe.Call, int) turnframe.Outcome {
			cancel() // the caller gives up while the command runs
			<-release
			return turnframe.Unknown("")
		})
		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.True(errors.Is(err, context.Canceled))                                // the caller's error
		is.Equal(report.Results[0].Kind, turnframe.ResultPending)                // not an outcome
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // left for a later Execute
		again := rtNewHandler(rtScript)
		report, err = rt.Execute(context.Background(), rtAccount, turn, again)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultInFlight) // its handler may still run: not while its lease holds
		is.Equal(again.callsOf("k-book"), 0)
		report, err = turnframe.New(store, rtAfterLeases()).Execute(context.Background(), rtAccount, turn, again)
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // then resumed by key
	})
}

// Two runtimes executing one turn at once, as two sweeps on one file do at
// start-up, never run one command twice at once: the second finds it in
// flight and moves on (issue 12, item 8).
func TestRuntimeRunsACommandInOnePlaceAtATime(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		started := make(chan struct{})
		proceed := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(proceed) }) })
		slow := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
			if call.Command.Key == "k-book" {
				close(started)
				<-proceed
			}
			return rtScript(ctx, call, n)
		})
		a, b := turnframe.New(store), turnframe.New(store)
		turn := rtPlanned(t, a, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-bump", "flight/8", "bump"))
		done := make(chan error, 1)
		go func() {
			_, err := a.Execute(ctx, rtAccount, turn, slow)
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("runtime A returned before its handler started: %v", err)
		}
		fast := rtNewHandler(rtScript)
		report, err := b.Execute(ctx, rtAccount, turn, fast)
		is.NoErr(err)                                                                                        // B moves on
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultInFlight, turnframe.ResultPending}) // A holds the first; B stops there
		is.Equal(len(fast.calls), 0)                                                                         // B ran nothing
		once.Do(func() { close(proceed) })
		is.NoErr(<-done)                                                                                        // A finishes the turn
		is.Equal(slow.callsOf("k-book"), 1)                                                                     // once
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7"), map[turnframe.IdempotencyKey]int{"k-book": 1}) // one commit
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"})                                         // one row
		is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted)
	})
}

// Attempt A's lease ended and B took the command over: A's late commit is
// refused, and A does not run the handler again.
func TestRuntimeRefusesTheCommitOfASupersededAttempt(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		started := make(chan struct{})
		proceed := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(proceed) }) })
		slow := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
			close(started)
			<-proceed
			return rtScript(ctx, call, n)
		})
		a, b := turnframe.New(store), turnframe.New(store, rtAfterLeases())
		turn := rtPlanned(t, a, rtAccount, rtCmd("k-book", "flight/7", "book"))
		done := make(chan error, 1)
		go func() {
			_, err := a.Execute(ctx, rtAccount, turn, slow)
			done <- err
		}()
		<-started
		report, err := b.Execute(ctx, rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)                                               // B takes the command over once A's lease ended
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // and commits it
		once.Do(func() { close(proceed) })
		err = <-done
		is.True(errors.Is(err, turnframe.ErrConflict))                                                          // A's attempt was superseded
		is.Equal(slow.callsOf("k-book"), 1)                                                                     // A did not re-run it
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7"), map[turnframe.IdempotencyKey]int{"k-book": 1}) // one commit
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"})                                         // one row
	})
}
