package turnframe_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The attempt's keeper "renews the lease when it ends within half a
// margin, as a sweep's keeper does". A keeper renewing only within a
// quarter margin survived every test: each step the tests made landed the
// lease past its end. The clock here lands it between the two, and then
// stands: the keeper must renew at its first look, and must not renew a
// lease that ends further than half a margin away. The test counts the
// keeper's looks by its readings of the clock (nothing else reads it while
// the handler runs), so it never waits on a duration.
func TestAnAttemptsKeeperRenewsALeaseThatEndsWithinHalfAMargin(t *testing.T) {
	const margin = 40 * time.Second
	for _, tt := range []struct {
		name  string
		left  time.Duration // what is left of the lease once the clock moved
		renew bool
	}{
		{"BetweenAQuarterAndHalfAMargin", 3 * margin / 8, true},
		{"MoreThanHalfAMargin", 5 * margin / 8, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, inner turnframe.Store) {
				is := is.New(t)
				clk := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
				var armed atomic.Bool
				reads := make(chan time.Time, 64)
				read := func() time.Time {
					at := clk.read()
					if armed.Load() {
						select {
						case reads <- at:
						default:
						}
					}
					return at
				}
				spy := &renewSpy{Store: inner, renewed: make(chan time.Time, 1)}
				rt := turnframe.New(spy, turnframe.WithClock(read), turnframe.WithCommandTimeout(30*time.Second),
					turnframe.WithLeaseMargin(margin), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("pay-1", "invoice/1", "pay"))

				entered, proceed := make(chan struct{}), make(chan struct{})
				h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
					close(entered)
					<-proceed
					return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
				})
				out := make(chan error, 1)
				go func() {
					_, err := rt.Execute(context.Background(), rtAccount, turn, h)
					out <- err
				}()
				await(t, entered, "the handler is called")

				at := rtEntry(t, inner, "pay-1").LeaseUntil.Add(-tt.left)
				armed.Store(true)
				spy.armed.Store(true)
				clk.set(at)
				// Once the clock reads at, the keeper's first look renews at
				// once (a second reading, for the renewal's Now, and the
				// write) or not at all: three readings of at with no renewal
				// are three looks.
				renewed := false
				for looks := 0; !renewed && looks < 3; {
					select {
					case <-spy.renewed:
						renewed = true
					case seen := <-reads:
						if seen.Equal(at) {
							looks++
						}
					case <-time.After(safetyNet):
						t.Fatal("the keeper never looked")
					}
				}
				select {
				case <-spy.renewed: // written before the keeper's next reading of the clock
					renewed = true
				default:
				}
				close(proceed)
				is.NoErr(await(t, out, "Execute returns"))
				is.Equal(renewed, tt.renew) // renewed if, and only if, the lease ends within half a margin
			})
		})
	}
}
