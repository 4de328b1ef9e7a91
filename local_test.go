package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// rtApplies counts the Applies that reach its Store: the write
// transactions a runtime makes.
type rtApplies struct {
	turnframe.Store
	mu sync.Mutex
	n  int
}

func (s *rtApplies) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	return s.Store.Apply(ctx, w)
}

func (s *rtApplies) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// A local command is settled straight from Pending: one write per command
// instead of a take and a settlement, with the same outcome, events and
// outbox rows, the attempt counted and recorded.
func TestALocalCommandTakesOneWriteInsteadOfTwo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []turnframe.Option
		applies int // Execute's writes for two commands
	}{
		{"undeclared", nil, 4},
		{"local", []turnframe.Option{turnframe.WithLocalCommand("book", "refuse")}, 2},
		{"one of two local", []turnframe.Option{turnframe.WithLocalCommand("refuse")}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				counted := &rtApplies{Store: store}
				rt := turnframe.New(counted, tc.opts...)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-no", "flight/8", "refuse"))
				before := counted.count()
				report, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
				is.NoErr(err)
				is.Equal(counted.count()-before, tc.applies)                    // write transactions
				is.Equal(report.Phase, turnframe.PhaseCommitted)                // nothing left pending
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)     // the commit
				is.Equal(report.Results[1].Kind, turnframe.ResultRejected)      // the reject
				is.Equal(report.Results[1].Code, "sold_out")                    // with its code
				is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"}) // the commit's row
				for i, key := range []turnframe.IdempotencyKey{"k-book", "k-no"} {
					e := rtEntry(t, store, key)
					is.Equal(e.Attempts, 1)                        // one attempt, counted
					is.Equal(e.Attempt, report.Results[i].Attempt) // reported
					is.True(e.LeaseUntil.IsZero())                 // no lease left
				}
				is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted) // as stored
			})
		})
	}
}

// A local handler that panics or outlives its timeout did nothing outside
// the process: its entry stays Pending (not OutcomeUnknown), Execute stops
// there with an error and runs nothing after it, and a later Execute runs
// it again.
func TestALocalCommandThatPanicsOrTimesOutStaysPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handle  func(ctx context.Context) turnframe.Outcome
		timeout error         // what the error wraps, if anything
		limit   time.Duration // the command timeout: a panic must come within it, however loaded the machine
	}{
		{"panic", func(context.Context) turnframe.Outcome { panic("seat map corrupt") }, nil, time.Minute},
		{"timeout", func(ctx context.Context) turnframe.Outcome {
			<-ctx.Done()
			return turnframe.Commit(nil) // an answer after the deadline counts for nothing
		}, context.DeadlineExceeded, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store, turnframe.WithLocalCommand("book", "bump"), turnframe.WithCommandTimeout(tc.limit),
					turnframe.WithLogger(slog.New(slog.DiscardHandler)))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-bump", "flight/8", "bump"))
				var mu sync.Mutex // a timed-out handler goes on in its own goroutine
				var ran []turnframe.IdempotencyKey
				started := make(chan struct{}, 2)
				report, err := rt.Execute(context.Background(), rtAccount, turn,
					turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
						mu.Lock()
						ran = append(ran, call.Command.Key)
						mu.Unlock()
						started <- struct{}{}
						return tc.handle(ctx)
					}))
				select { // a handler whose deadline passed before it was scheduled still runs, later
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("the handler never ran")
				}
				mu.Lock()
				defer mu.Unlock()
				is.True(err != nil) // Execute stops with an error
				if tc.timeout != nil {
					is.True(errors.Is(err, tc.timeout)) // a timeout says so
				}
				is.Equal(report.Results[0].Kind, turnframe.ResultPending)              // left to run again
				is.True(report.Results[0].Ran)                                         // after it ran here
				is.Equal(report.Results[0].Panic != nil, tc.name == "panic")           // the panic reported
				is.Equal(ran, []turnframe.IdempotencyKey{"k-book"})                    // nothing ran after it
				is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalPending) // not unknown: nothing left
				is.Equal(rtEntry(t, store, "k-book").Attempts, 0)                      // nor counted
				is.Equal(rtEntry(t, store, "k-bump").Status, turnframe.JournalPending) // the next one waits
				is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)                    // nothing enqueued

				report, err = turnframe.New(store, turnframe.WithLocalCommand("book", "bump")).Execute(context.Background(), rtAccount, turn,
					rtNewHandler(rtScript))
				is.NoErr(err)                                                         // a later Execute
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)           // runs it again
				is.Equal(report.Results[1].Kind, turnframe.ResultCommitted)           // and the next
				is.Equal(rtEntry(t, store, "k-book").Attempts, 1)                     // one attempt landed
				is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7")["k-book"], 1) // one event
			})
		})
	}
}

// Two Executes of one turn at the same moment may both call a local
// command's handler (no lease says it runs); the journal's compare-and-set
// lets only the first commit land, and the second's events and outbox
// rows are never written.
func TestTwoExecutesOfALocalCommandAtOnceCommitItOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(store, turnframe.WithLocalCommand("book"))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		loser := turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked-by-the-loser"}},
			turnframe.OutboxMessage{Destination: "payments", Payload: []byte("loser")})
		finish := rtHeld(t, rt, turn, "k-book", loser) // the first caller's handler runs…

		report, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)                                               // …while a second Execute
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // commits it
		won := rtEntry(t, store, "k-book").Attempt

		report, err = finish()
		is.NoErr(err)                                             // the first caller's commit is refused, not an error
		is.Equal(report.Results[0].Kind, turnframe.ResultSkipped) // it finds the command settled
		is.True(report.Results[0].Ran)                            // after its handler ran
		is.Equal(rtEntry(t, store, "k-book").Attempt, won)        // the winner's attempt stands
		is.Equal(rtEntry(t, store, "k-book").Attempts, 1)         // counted once
		evs, err := store.EventsSince(context.Background(), rtAccount, "flight/7", 0, turnframe.MaxLimit)
		is.NoErr(err)
		is.Equal(len(evs), 1)                                           // one event…
		is.Equal(evs[0].Type, "booked")                                 // …the winner's
		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"}) // one row
	})
}

// A turn abandoned while its local command's handler ran: the command
// never runs on an abandoned turn, so its outcome is refused whole.
func TestALocalCommandOfATurnAbandonedWhileItRanWritesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(store, turnframe.WithLocalCommand("book"))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, rt, turn, "k-book", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
		is.NoErr(rt.Abandon(context.Background(), rtAccount, turn, "user_left"))
		_, err := finish()
		is.True(errors.Is(err, turnframe.ErrConflict))                         // refused
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalPending) // never ran
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0)       // nothing written
	})
}

// When a local command's commit finds its case moved, the handler runs
// again under the same attempt against the new revision, as for any
// command.
func TestALocalCommandRunsAgainWhenItsCaseMoved(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(store, turnframe.WithLocalCommand("book", "bump"))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		other := rtPlanned(t, rt, rtAccount, rtCmd("k-bump", "flight/7", "bump"))
		var calls []turnframe.Call
		report, err := rt.Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				calls = append(calls, call)
				if len(calls) == 1 { // the case moves under the first call
					_, err := rt.Execute(ctx, rtAccount, other, rtNewHandler(rtScript))
					is.NoErr(err) // the other turn commits on the same case
				}
				return rtScript(ctx, call, 1)
			}))
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // landed on the second call
		is.Equal(len(calls), 2)                                     // run again once
		is.Equal(calls[1].Attempt, calls[0].Attempt)                // under the same attempt
		is.True(calls[1].Revision > calls[0].Revision)              // against the new revision
		is.Equal(rtEntry(t, store, "k-book").Attempts, 1)           // one attempt
	})
}

// An entry of a local command that an attempt left Executing (run before
// the declaration, or by a process without it) is taken over as any other
// once its lease ended.
func TestALocalCommandLeftExecutingIsTakenOver(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithLocalCommand("book"))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		gen := turnframe.NewIDGenerator()
		_, err := store.Apply(context.Background(), turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.read(),
			Settle: []turnframe.Settlement{{Key: "k-book", To: turnframe.JournalExecuting, Attempt: gen.AttemptID(clock.read()), Lease: time.Minute}}})
		is.NoErr(err) // an attempt took it and died
		clock.set(clock.read().Add(2 * time.Minute))
		counted := &rtApplies{Store: store}
		report, err := turnframe.New(counted, turnframe.WithClock(clock.read), turnframe.WithLocalCommand("book")).
			Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // run
		is.Equal(counted.count(), 2)                                // by a take and a settlement
		is.Equal(rtEntry(t, store, "k-book").Attempts, 2)           // the second attempt
	})
}

// A local command whose commit the store refuses half-way — the
// application's own writes fail inside the transaction — writes nothing:
// the entry stays Pending (not Executing: no take was made), Execute
// returns ErrAppWrite and runs nothing after it, and a later Execute runs
// the command again and commits it once.
func TestALocalCommandWhoseAppWritesFailStaysPending(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		errSoldOut := errors.New("seat sold out")
		rt := turnframe.New(store, turnframe.WithLocalCommand("book", "bump"), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-bump", "flight/8", "bump"))
		failing := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
			return rtScript(ctx, call, 1).With(func(context.Context, turnframe.Tx) error { return errSoldOut })
		})
		report, err := rt.Execute(context.Background(), rtAccount, turn, failing)
		is.True(errors.Is(err, turnframe.ErrAppWrite))                               // the refused write is reported
		is.True(errors.Is(err, errSoldOut))                                          // with the app's own error
		is.Equal(report.Results[0].Kind, turnframe.ResultPending)                    // left to run again
		is.Equal(report.Results[1].Kind, turnframe.ResultPending)                    // and the next one waits
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalPending)       // not taken, not unknown
		is.Equal(rtEntry(t, store, "k-book").Attempts, 0)                            // nothing counted
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7", "flight/8")), 0) // no event
		is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)                          // no row

		report, err = rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
		is.NoErr(err)                                                         // a later Execute
		is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)           // commits it
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7")["k-book"], 1) // once
	})
}
