package turnframe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Edges of the turn's life and of the recovery loop that an outside attack
// found failing, kept as their regression tests.

// A command timeout of math.MaxInt64, a natural way to say "no timeout",
// must not overflow the command's lease into a negative one: every take
// used to be refused, and no command could run.
func TestAHugeCommandTimeoutStillRunsCommands(t *testing.T) {
	for name, opt := range map[string]turnframe.Option{
		"CommandTimeout": turnframe.WithCommandTimeout(time.Duration(math.MaxInt64)),
		"LeaseMargin":    turnframe.WithLeaseMargin(time.Duration(math.MaxInt64)),
	} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store, opt)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "bump"))
				report, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
				is.NoErr(err) // a huge timeout runs the command
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)
			})
		})
	}
}

// A handler's rejection, or its message's trace context, that no store
// keeps must not jam the command: refused, the entry stayed Executing, its
// handler ran again after the lease, and the turn could never be
// delivered. The rejection lands with a replacement code; the bad trace
// context is dropped.
func TestAHandlersWordsNeverJamItsCommand(t *testing.T) {
	tests := []struct {
		name string
		out  turnframe.Outcome
		want turnframe.JournalStatus
	}{
		{"RejectWithAnOverlongCode", turnframe.Reject("card_declined: " + strings.Repeat("x", 200)), turnframe.JournalRejected},
		{"RejectWithANUL", turnframe.Reject("declined\x00"), turnframe.JournalRejected},
		{"CommitWithABadTraceContext", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}},
			turnframe.OutboxMessage{Destination: "mail", TraceContext: "bad\x00" + strings.Repeat("t", 600)}), turnframe.JournalCommitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				clock := newStepClock(dispNow)
				rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "pay"))
				h := rtNewHandler(func(context.Context, turnframe.Call, int) turnframe.Outcome { return tt.out })
				_, err := rt.Execute(context.Background(), rtAccount, turn, h)
				is.NoErr(err)
				clock.set(dispNow.Add(time.Hour)) // a lease would have ended
				_, err = rt.Execute(context.Background(), rtAccount, turn, h)
				is.NoErr(err)
				e := rtEntry(t, store, "k1")
				is.Equal(e.Status, tt.want)  // the outcome is recorded
				is.Equal(h.callsOf("k1"), 1) // and the handler not called again
				if tt.want == turnframe.JournalRejected {
					is.Equal(e.Code, turnframe.CodeInvalidRejectCode)
				}
			})
		})
	}
}

// rtPanicky is a RecoveryHandler whose interpretation panics.
type rtPanicky struct{}

func (rtPanicky) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	panic("llm client bug")
}
func (rtPanicky) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (rtPanicky) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// A RecoveryHandler's panic is the turn's failure, reported, not a panic
// out of Recover: one bad turn must not end the recovery pass (and the
// process) at every start-up, nor keep the next turn from being recovered.
func TestARecoveryHandlersPanicIsTheTurnsFailure(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(store)
		for range 2 {
			_, err := rt.Receive(context.Background(), rtAccount, rt.NewConversationID(), "hi")
			is.NoErr(err)
		}
		report, err := turnframe.NewRecovery(store, turnframe.WithLogger(slog.New(slog.DiscardHandler))).
			Recover(context.Background(), turnframe.RecoveryScope{}, rtPanicky{})
		is.NoErr(err)
		is.Equal(report.Turns.Turns, 2)         // both turns tried
		is.Equal(len(report.Turns.Failures), 2) // each failed, reported
		is.True(strings.Contains(report.Turns.Failures[0].Err.Error(), "llm client bug"))
	})
}

// rtCancelOnFirst is a RecoveryHandler that ends the pass's context in its
// first call.
type rtCancelOnFirst struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	calls  int
}

func (c *rtCancelOnFirst) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.cancel()
	return nil
}
func (*rtCancelOnFirst) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (*rtCancelOnFirst) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// A pass cut short by its context stops there: the turns it no longer
// reaches are neither tried nor warned about one by one, and no goroutine
// is left behind.
func TestARecoveryPassCutShortStopsQuietly(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rt := turnframe.New(store)
		for range 5 {
			_, err := rt.Receive(context.Background(), rtAccount, rt.NewConversationID(), "hi")
			is.NoErr(err)
		}
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&rtLockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		before := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		h := &rtCancelOnFirst{cancel: cancel}
		err := turnframe.NewRecovery(store, turnframe.WithLogger(logger)).Run(ctx, turnframe.RecoveryLoop{Handler: h, Interval: time.Hour})
		is.NoErr(err)
		is.Equal(h.calls, 1) // the pass stopped after the turn whose call ended it
		eventually(t, "goroutines back", func() bool { return runtime.NumGoroutine() <= before })
		mu.Lock()
		defer mu.Unlock()
		is.Equal(strings.Count(logs.String(), "turn not recovered"), 0) // no warning per turn not reached
	})
}

// rtLockedWriter serialises writes to w.
type rtLockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *rtLockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A plan's replay record is bounded like every other input: its loaded
// cases and its questions by Limits.Cases and Limits.Questions at the
// Runtime (100 each by default), and by MaxPlanCases and MaxPlanQuestions
// in every store. A plan of 100,000 of each (19 MB, model output) used to
// be stored in one transaction, and every regeneration built 10^10 case
// keys of answer tasks from it.
func TestAPlansReplayRecordIsBounded(t *testing.T) {
	many := func(n int) ([]turnframe.CaseKey, []turnframe.UnderstoodQuestion) {
		cases := make([]turnframe.CaseKey, n)
		for i := range cases {
			cases[i] = turnframe.CaseKey(fmt.Sprint("case/", i))
		}
		return cases, make([]turnframe.UnderstoodQuestion, n)
	}
	tests := []struct {
		name      string
		cases     int
		questions int
		field     string
	}{
		{"CasesOverTheLimit", 101, 1, "loaded_cases"},
		{"QuestionsOverTheLimit", 1, 101, "understanding.questions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rt := turnframe.New(store)
				turn, err := rt.Receive(context.Background(), rtAccount, rt.NewConversationID(), "q")
				is.NoErr(err)
				cases, _ := many(tt.cases)
				_, questions := many(tt.questions)
				_, err = rt.Plan(context.Background(), rtAccount, turn, turnframe.Plan{
					LoadedCases: cases, Understanding: &turnframe.Understanding{Questions: questions}})
				is.True(errors.Is(err, turnframe.ErrInvalid)) // over the Runtime's limit
				is.True(strings.Contains(err.Error(), tt.field))
				rt100 := turnframe.New(store, turnframe.WithLimits(turnframe.Limits{Cases: 1000, Questions: 1000}))
				_, err = rt100.Plan(context.Background(), rtAccount, turn, turnframe.Plan{
					LoadedCases: cases, Understanding: &turnframe.Understanding{Questions: questions}})
				is.NoErr(err) // a raised limit takes it
			})
		})
	}
	t.Run("EveryStoreKeepsTheCeilings", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			rt := turnframe.New(store)
			turn, err := rt.Receive(context.Background(), rtAccount, rt.NewConversationID(), "q")
			is.NoErr(err)
			cases, questions := many(turnframe.MaxPlanCases + 1)
			_, err = store.Apply(context.Background(), turnframe.Write{Account: rtAccount, Turn: turn, Now: dispNow,
				Replay: &turnframe.ReplayRecord{LoadedCases: cases, Understanding: &turnframe.Understanding{Questions: questions}}})
			is.True(errors.Is(err, turnframe.ErrInvalid)) // whoever wrote the Write
			is.True(strings.Contains(err.Error(), "ceiling"))
		})
	})
}
