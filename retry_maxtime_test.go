package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// DESIGN.md §8: RunOnce "settles each in one of four ways … There is no
// error path: a sender must choose", and "A settlement always lands";
// §3: every time a store takes lies in [MinTime, MaxTime]. A claim made at a
// time whose lease still fits before MaxTime (the store grants it), whose
// sender answers Retryable ("nothing left, send again"), gets a retry time
// of now + backoff past MaxTime: the store refuses the settlement as
// ErrInvalid, the row is reported Unsettled and stays Dispatching, and once
// its lease ends recovery expires it to OutcomeUnknown
// (turnframe.lease_ended) — a send that said nothing left becomes an
// unknown outcome, and is resent blindly for an undeclared destination.
func TestARetryableAnswerNearMaxTimeIsSettled(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "busy", RetryAfter: time.Hour}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.MaxBackoff = time.Hour
		d := turnframe.NewDispatcher(store, sender, cfg)
		now := turnframe.MaxTime.Add(-2 * d.Config().Lease()) // the claim's lease ends a lease before MaxTime
		report, err := d.RunOnce(context.Background(), now)
		is.NoErr(err)
		got := dispGet(t, store, rows[0].ID)
		t.Logf("report %+v; row %v", report, got.Status)
		is.Equal(report.Retried, []turnframe.OutboxID{rows[0].ID}) // settled as the sender classified it
		is.Equal(got.Status, turnframe.OutboxPending)
	})
}
