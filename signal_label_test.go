package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// SignalExternalOutcomeUnknown: "Labels: Destination and Outcome (a send:
// the code the row was settled with, e.g. "http.504" or CodeSendTimeout …)".
// The doc's example used to say "timeout", a command's label, and a
// dashboard filtering on it for sends found nothing.
func TestATimedOutSendIsLabelledWithItsRowsCode(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
		obs := &recorder{}
		release := make(chan struct{})
		defer close(release)
		sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			<-ctx.Done()
			<-release
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w", SendTimeout: 10 * time.Millisecond},
			turnframe.WithObserver(obs))
		_, err := d.RunOnce(context.Background(), dispNow.Add(time.Hour))
		is.NoErr(err)
		row := dispGet(t, store, rows[0].ID)
		is.Equal(row.LastCode, turnframe.CodeSendTimeout)
		got := obs.labels(turnframe.SignalExternalOutcomeUnknown)
		is.Equal(len(got), 1)
		t.Logf("label: %+v", got[0])
		is.Equal(got[0].Outcome, turnframe.CodeSendTimeout) // the row's code, as the doc says
	})
}
