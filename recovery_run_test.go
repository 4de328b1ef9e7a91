package turnframe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Recovery.Run recovers at once and then at every interval, hands each
// pass's report to Report, and returns nil when its context ends.
func TestRecoveryRunRecoversAtStartAndAtEveryInterval(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	_, err := store.ClaimDue(context.Background(), dispNow, 1, "dead-worker", time.Second)
	is.NoErr(err) // a claim whose worker died
	r := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return dispNow.Add(time.Minute) }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan turnframe.RecoverReport, 2)
	loop := turnframe.RecoveryLoop{Handler: polNoTurns{t}, Interval: time.Millisecond,
		Report: func(rep turnframe.RecoverReport, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			reports <- rep
			if len(reports) == cap(reports) {
				cancel() // two passes seen
			}
		}}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, loop) }()
	is.NoErr(await(t, done, "Run returns")) // nil when its context ends
	first, second := await(t, reports, "the first report"), await(t, reports, "the second report")
	is.Equal(first.Expired, []turnframe.OutboxID{rows[0].ID}) // the first pass expired the dead claim
	is.Equal(len(second.Expired), 0)                          // the second found nothing more to expire
}

// Recovery.Run refuses a loop without a handler, and returns an error
// wrapping ErrClosed once a pass finds the store closed.
func TestRecoveryRunRefusesWhatItCannotRun(t *testing.T) {
	tests := []struct {
		name  string
		close bool
		loop  func(t *testing.T) turnframe.RecoveryLoop
		want  error
	}{
		{"NoHandlerIsInvalid", false, func(*testing.T) turnframe.RecoveryLoop { return turnframe.RecoveryLoop{} }, turnframe.ErrInvalid},
		{"AClosedStoreEndsTheRun", true, func(t *testing.T) turnframe.RecoveryLoop {
			return turnframe.RecoveryLoop{Handler: polNoTurns{t}, Interval: time.Millisecond}
		}, turnframe.ErrClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			store := memstoreFor(t)
			if tc.close {
				is.NoErr(store.Close())
			}
			ctx, cancel := context.WithTimeout(context.Background(), safetyNet) // a Run that does not stop fails, not hangs
			defer cancel()
			err := turnframe.NewRecovery(store).Run(ctx, tc.loop(t))
			is.True(errors.Is(err, tc.want)) // the error says why
		})
	}
}
