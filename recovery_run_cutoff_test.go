package turnframe_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A command timeout of math.MaxInt64 is "no timeout", and the runtime runs
// commands under it (TestAHugeCommandTimeoutStillRunsCommands). Recovery.Run
// with the same options must keep recovering after its first pass: its
// later passes' scope is now − StaleAfter, StaleAfter defaulting to the
// command lease (capped at a hundred years), which lies before MinTime.
// Every later pass was then ErrInvalid before it did anything: claims whose
// lease ended were never expired, unknown rows never handed to the policy.
func TestARecoveryLoopWithAHugeCommandTimeoutKeepsRecovering(t *testing.T) {
	for name, opt := range map[string]turnframe.Option{
		"CommandTimeout": turnframe.WithCommandTimeout(time.Duration(math.MaxInt64)),
		"LeaseMargin":    turnframe.WithLeaseMargin(time.Duration(math.MaxInt64)),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			store := memstoreFor(t)
			rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
			clock := newStepClock(dispNow)
			r := turnframe.NewRecovery(store, opt, turnframe.WithClock(clock.read))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type pass struct {
				rep turnframe.RecoverReport
				err error
			}
			passes := make(chan pass, 2)
			loop := turnframe.RecoveryLoop{Handler: polNoTurns{t}, Interval: time.Millisecond,
				Report: func(rep turnframe.RecoverReport, err error) {
					if len(passes) == 0 {
						// After the start-up pass: a dispatcher claims the
						// row and dies; its lease ends before the next pass.
						_, cerr := store.ClaimDue(context.Background(), dispNow, 1, "dead-worker", time.Second)
						if cerr != nil {
							t.Errorf("claim: %v", cerr)
						}
						clock.set(dispNow.Add(time.Hour))
					}
					passes <- pass{rep, err}
					if len(passes) == cap(passes) {
						cancel()
					}
				}}
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, loop) }()
			is.NoErr(await(t, done, "Run returns"))
			first, second := await(t, passes, "the first pass"), await(t, passes, "the second pass")
			is.NoErr(first.err)                                            // the start-up pass
			is.NoErr(second.err)                                           // a later pass recovers too
			is.Equal(second.rep.Expired, []turnframe.OutboxID{rows[0].ID}) // it expired the dead claim
		})
	}
}
