package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// timings is an Observer keeping the SignalCommandDuration observations.
type timings struct {
	mu   sync.Mutex
	seen []timing
}

type timing struct {
	labels turnframe.Labels
	d      time.Duration
}

func (r *timings) Observe(s turnframe.Signal, l turnframe.Labels, d time.Duration) {
	if s != turnframe.SignalCommandDuration {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, timing{l, d})
}

func (r *timings) all() []timing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]timing(nil), r.seen...)
}

func TestCommandDurationIsEmittedForEachHandlerCall(t *testing.T) {
	cases := []struct {
		name    string
		command string
		outcome string
	}{
		{"a commit", "book", "commit"},
		{"a rejection", "refuse", "reject"},
		{"an unknown answer", "charge", "unknown"},
		{"a panic", "explode", "panic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock := newStepClock(clockT0)
				obs := &timings{}
				rt := turnframe.New(store, turnframe.WithClock(clock.read), turnframe.WithObserver(obs))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-1", "case/1", tc.command))
				_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
					clock.set(clockT0.Add(time.Second)) // the handler takes a while, by the clock
					if call.Command.Name == "explode" {
						panic("boom")
					}
					return rtScript(ctx, call, 1)
				}))
				is.NoErr(err) // execute

				seen := obs.all()
				is.Equal(len(seen), 1)                                                               // one signal per handler call
				is.Equal(seen[0].labels, turnframe.Labels{Command: tc.command, Outcome: tc.outcome}) // labelled by command and outcome
				is.True(seen[0].d > 0)                                                               // the time the call took, by the clock
			})
		})
	}

	t.Run("a timeout, by the real clock", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			obs := &timings{}
			rt := turnframe.New(store, turnframe.WithCommandTimeout(time.Millisecond), turnframe.WithObserver(obs))
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-1", "case/1", "book"))
			_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				<-ctx.Done()
				return turnframe.Reject("too_late")
			}))
			is.NoErr(err) // execute

			seen := obs.all()
			is.Equal(len(seen), 1)                                                          // one signal for the call that timed out
			is.Equal(seen[0].labels, turnframe.Labels{Command: "book", Outcome: "timeout"}) // labelled timeout, not the late answer
			is.True(seen[0].d > 0)                                                          // the time waited
		})
	})

	t.Run("not for a command it did not run again", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			ctx := context.Background()
			obs := &timings{}
			rt := turnframe.New(store, turnframe.WithObserver(obs))
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k-1", "case/1", "book"))
			h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome { return rtScript(ctx, call, 1) })
			_, err := rt.Execute(ctx, rtAccount, turn, h)
			is.NoErr(err) // first execute
			_, err = rt.Execute(ctx, rtAccount, turn, h)
			is.NoErr(err)               // second execute skips the committed command
			is.Equal(len(obs.all()), 1) // only the call that ran
		})
	})
}
