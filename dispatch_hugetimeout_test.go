package turnframe_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestAHugeSendTimeoutStillSends: the dispatcher's twin of
// TestAHugeCommandTimeoutStillRunsCommands (RELIABILITY §12 row 19). A
// SendTimeout or LeaseMargin of math.MaxInt64 ("no deadline of mine")
// overflows Config().Lease() = SendTimeout + LeaseMargin into a negative
// duration; NewDispatcher accepts the config, and then every claim is
// refused as ErrInvalid: no row is ever sent, and Run only logs.
func TestAHugeSendTimeoutStillSends(t *testing.T) {
	huge := time.Duration(math.MaxInt64)
	for name, cfg := range map[string]turnframe.DispatchConfig{
		"SendTimeout": {WorkerID: "w1", SendTimeout: huge},
		"LeaseMargin": {WorkerID: "w1", LeaseMargin: huge},
	} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
				d := turnframe.NewDispatcher(store, &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}, cfg)
				report, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err) // a huge timeout still sends
				is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID})
				is.True(d.Config().Lease() > 0) // a lease, not an overflow
			})
		})
	}
}
