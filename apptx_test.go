package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// appPut returns the app's writes that put key = value on memstore.
func appPut(key, value string) turnframe.AppWrites {
	return func(_ context.Context, tx turnframe.Tx) error {
		a, ok := memstore.AppTxOf(tx)
		if !ok {
			return errors.New("not a memstore Tx")
		}
		a.Put(key, []byte(value))
		return nil
	}
}

// appKeys returns the app's committed keys on store.
func appKeys(t *testing.T, store *memstore.Store) []string {
	t.Helper()
	keys, err := store.AppKeys(context.Background())
	if err != nil {
		t.Fatalf("app keys: %v", err)
	}
	return keys
}

// booked commits one event on the command's case, one outbox message, and
// the app's row "booking/KEY".
func booked(call turnframe.Call) turnframe.Outcome {
	c := call.Command
	return turnframe.Commit([]turnframe.Event{{Case: c.Case, Type: "booked"}}, turnframe.OutboxMessage{Destination: "payments"}).
		With(appPut("booking/"+string(c.Key), "seat 4A"))
}

func TestExecuteWritesTheAppsRowsInTheCommit(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-note", "flight/7", "note"))

	report, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		if call.Command.Name == "note" { // two writes, in order: the second sees the first
			return turnframe.Commit(nil).With(appPut("note", "1")).With(func(_ context.Context, tx turnframe.Tx) error {
				a, _ := memstore.AppTxOf(tx)
				v, ok := a.Get("note")
				if !ok || string(v) != "1" {
					return errors.New("the first write is not visible to the second")
				}
				a.Put("note", []byte("2"))
				return nil
			}).With(nil)
		}
		return booked(call)
	}))
	is.NoErr(err) // execute
	is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultCommitted, turnframe.ResultCommitted})
	is.Equal(appKeys(t, store), []string{"booking/k-book", "note"}) // each commit's rows
	v, err := store.AppValue(ctx, "note")
	is.NoErr(err)                                                         // app value
	is.Equal(string(v), "2")                                              // the chained writes ran in order
	is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"})       // with the outbox row
	is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted)           // and the turn committed
	is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7")["k-book"], 1) // and the event
}

func TestExecuteWithAFailingAppWriteCommitsNothing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := newStepClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithClock(clock.read))
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
	errSoldOut := errors.New("seat sold out")
	failing := turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		return booked(call).With(func(context.Context, turnframe.Tx) error { return errSoldOut })
	})

	report, err := rt.Execute(ctx, rtAccount, turn, failing)
	is.True(errors.Is(err, turnframe.ErrAppWrite))                           // the app's writes failed
	is.True(errors.Is(err, errSoldOut))                                      // with the app's own error
	is.Equal(report.Results[0].Kind, turnframe.ResultPending)                // reported pending
	is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // held by the attempt, as after a crash
	is.Equal(len(appKeys(t, store)), 0)                                      // no app row, not even the one put before the error
	is.Equal(len(rtOutboxKeys(t, store, rtAccount)), 0)                      // no outbox row
	is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0)         // no event
	is.Equal(rtPhase(t, store, turn), turnframe.PhaseExecuting)              // no move to Committed

	// Once the attempt's lease ended, a later Execute runs it again.
	clock.set(clock.read().Add(turnframe.DefaultCommandTimeout + turnframe.DefaultLeaseMargin + time.Second))
	report, err = rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		return booked(call)
	}))
	is.NoErr(err)                                                   // execute again
	is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)     // committed
	is.Equal(appKeys(t, store), []string{"booking/k-book"})         // with its row, once
	is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book"}) // and its outbox row, once
}

func TestExecuteRerunKeepsOnlyTheCommittedRunsAppRows(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	a, b := turnframe.New(store), turnframe.New(store)
	turnA := rtPlanned(t, a, rtAccount, rtCmd("a-hold", "flight/7", "hold"))
	turnB := rtPlanned(t, b, rtAccount, rtCmd("b-bump", "flight/7", "bump"))
	hold := rtNewHandler(func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome {
		if n == 1 { // the case moves under the first run
			if _, err := b.Execute(ctx, rtAccount, turnB, rtNewHandler(rtScript)); err != nil {
				return turnframe.Reject("b: " + err.Error())
			}
		}
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "held"}}).
			With(appPut("run", string(rune('0'+n))))
	})

	report, err := a.Execute(ctx, rtAccount, turnA, hold)
	is.NoErr(err)                                                        // execute
	is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)          // committed
	is.Equal(hold.revisionsOf("a-hold"), []turnframe.CaseRevision{0, 1}) // on its second run
	v, err := store.AppValue(ctx, "run")
	is.NoErr(err)            // app value
	is.Equal(string(v), "2") // the refused first run's writes never landed: the second's did
}

func TestWithOnAnOutcomeThatIsNotACommitPanics(t *testing.T) {
	tests := []struct {
		name string
		out  turnframe.Outcome
	}{
		{"Reject", turnframe.Reject("sold_out")},
		{"Unknown", turnframe.Unknown("ref-1")},
		{"TheZeroOutcome", turnframe.Outcome{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			defer func() {
				is.True(recover() != nil) // a programming error
			}()
			tc.out.With(appPut("k", "v"))
		})
	}
}

func TestExecuteReportsARejectWithWritesAsUnknown(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))

	report, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Reject("sold_out").With(appPut("k", "v"))
	}))
	is.NoErr(err)                                             // the panic does not escape
	is.Equal(report.Results[0].Kind, turnframe.ResultUnknown) // the handler panicked: its outcome is unknown
	is.True(report.Results[0].Panic != nil)                   // and the result says why
	is.Equal(len(appKeys(t, store)), 0)                       // no app row
}
