package otelturnframe_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/otelturnframe"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// sendAttrs are the attributes every send carries, plus extra.
func sendAttrs(destination string, extra ...string) map[string]string {
	m := map[string]string{
		"messaging.system": "turnframe", "messaging.operation.name": "send", "messaging.operation.type": "send",
		"messaging.destination.name": destination,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func TestObserveRecordsEachSignalOnItsInstrument(t *testing.T) {
	cases := []struct {
		name   string
		signal turnframe.Signal
		labels turnframe.Labels
		d      time.Duration
		want   []point
	}{
		{"a completed send's latency", turnframe.SignalExternalLatency, turnframe.Labels{Destination: "payments", Outcome: "completed"}, 250 * time.Millisecond,
			[]point{{name: "messaging.client.operation.duration", unit: "s", histogram: true, count: 1, sum: 0.25, attrs: sendAttrs("payments")}}},
		{"a refused send's latency", turnframe.SignalExternalLatency, turnframe.Labels{Destination: "payments", Outcome: "permanent"}, time.Second,
			[]point{{name: "messaging.client.operation.duration", unit: "s", histogram: true, count: 1, sum: 1, attrs: sendAttrs("payments", "error.type", "permanent")}}},
		{"a handler call", turnframe.SignalCommandDuration, turnframe.Labels{Command: "book", Outcome: "commit"}, 2 * time.Second,
			[]point{{name: "messaging.process.duration", unit: "s", histogram: true, count: 1, sum: 2, attrs: map[string]string{
				"messaging.system": "turnframe", "messaging.operation.name": "process", "messaging.operation.type": "process",
				"turnframe.command": "book", "turnframe.outcome": "commit"}}}},
		{"a handler that timed out", turnframe.SignalCommandDuration, turnframe.Labels{Command: "book", Outcome: "timeout"}, time.Second,
			[]point{{name: "messaging.process.duration", unit: "s", histogram: true, count: 1, sum: 1, attrs: map[string]string{
				"messaging.system": "turnframe", "messaging.operation.name": "process", "messaging.operation.type": "process",
				"turnframe.command": "book", "turnframe.outcome": "timeout", "error.type": "timeout"}}}},
		{"a completed row", turnframe.SignalOutboxCompleted, turnframe.Labels{Destination: "payments"}, 0,
			[]point{{name: "messaging.client.sent.messages", unit: "{message}", count: 1, attrs: sendAttrs("payments", "turnframe.outcome", "completed")}}},
		{"a retried row", turnframe.SignalOutboxRetried, turnframe.Labels{Destination: "payments", Outcome: "http.503"}, 0,
			[]point{{name: "messaging.client.sent.messages", unit: "{message}", count: 1, attrs: sendAttrs("payments", "turnframe.outcome", "retried", "error.type", "http.503")}}},
		{"a row put back unsent", turnframe.SignalOutboxRetried, turnframe.Labels{Destination: "payments", Outcome: turnframe.CodeNotSent}, 0,
			[]point{{name: "turnframe.outbox.not_sent", unit: "{row}", count: 1, attrs: map[string]string{"messaging.destination.name": "payments"}}}},
		{"a failed row", turnframe.SignalOutboxFailed, turnframe.Labels{Destination: "payments", Outcome: "http.400"}, 0,
			[]point{{name: "messaging.client.sent.messages", unit: "{message}", count: 1, attrs: sendAttrs("payments", "turnframe.outcome", "failed", "error.type", "http.400")}}},
		{"a row whose outcome is unknown", turnframe.SignalExternalOutcomeUnknown, turnframe.Labels{Destination: "payments"}, 0,
			[]point{
				{name: "messaging.client.sent.messages", unit: "{message}", count: 1, attrs: sendAttrs("payments", "turnframe.outcome", "unknown", "error.type", "unknown")},
				{name: "turnframe.external.outcome_unknown", unit: "{outcome}", count: 1, attrs: map[string]string{"messaging.destination.name": "payments"}},
			}},
		{"a command whose outcome is unknown", turnframe.SignalExternalOutcomeUnknown, turnframe.Labels{Command: "charge", Outcome: "panic"}, 0,
			[]point{{name: "turnframe.external.outcome_unknown", unit: "{outcome}", count: 1, attrs: map[string]string{"turnframe.command": "charge", "turnframe.outcome": "panic"}}}},
		{"a claim", turnframe.SignalOutboxClaimed, turnframe.Labels{Destination: "payments"}, 0,
			[]point{{name: "turnframe.outbox.claimed", unit: "{row}", count: 1, attrs: map[string]string{"messaging.destination.name": "payments"}}}},
		{"a reconciliation", turnframe.SignalExternalReconciled, turnframe.Labels{Command: "charge", Outcome: "completed"}, 0,
			[]point{{name: "turnframe.external.reconciled", unit: "{outcome}", count: 1, attrs: map[string]string{"turnframe.command": "charge", "turnframe.outcome": "completed"}}}},
		{"a commit", turnframe.SignalCommandCommitted, turnframe.Labels{Command: "book"}, 0,
			[]point{{name: "turnframe.command.committed", unit: "{command}", count: 1, attrs: map[string]string{"turnframe.command": "book"}}}},
		{"a rejection", turnframe.SignalCommandRejected, turnframe.Labels{Command: "book", Outcome: "sold_out"}, 0,
			[]point{{name: "turnframe.command.rejected", unit: "{command}", count: 1, attrs: map[string]string{"turnframe.command": "book", "turnframe.outcome": "sold_out"}}}},
		{"a recovery decision", turnframe.SignalRecoveryDecided, turnframe.Labels{Action: "resume_commands"}, 0,
			[]point{{name: "turnframe.recovery.decided", unit: "{decision}", count: 1, attrs: map[string]string{"turnframe.recovery.action": "resume_commands"}}}},
		{"a late answer", turnframe.SignalLateAnswer, turnframe.Labels{Outcome: "recorded"}, 0,
			[]point{{name: "turnframe.late_answer", unit: "{answer}", count: 1, attrs: map[string]string{"turnframe.outcome": "recorded"}}}},
		{"a signal it does not know", turnframe.Signal("made_up"), turnframe.Labels{Outcome: "x"}, time.Second, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			obs, reader := newObserved(t)
			obs.Observe(tc.signal, tc.labels, tc.d)

			got := collect(t, reader)
			is.Equal(len(got), len(tc.want)) // one point per instrument the signal names
			for i, w := range tc.want {
				is.Equal(got[i].name, w.name)              // instrument
				is.Equal(got[i].unit, w.unit)              // unit
				is.Equal(got[i].histogram, w.histogram)    // kind
				is.Equal(got[i].attrs, w.attrs)            // attributes, from the labels only
				is.Equal(got[i].count, w.count)            // one occurrence
				is.True(math.Abs(got[i].sum-w.sum) < 1e-9) // the duration in seconds
			}
		})
	}
}

func TestObserveIsSafeForConcurrentUse(t *testing.T) {
	is := is.New(t)
	obs, reader := newObserved(t)
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				dest := []string{"payments", "email"}[(g+i)%2]
				obs.Observe(turnframe.SignalOutboxClaimed, turnframe.Labels{Destination: dest}, 0)
				obs.Observe(turnframe.SignalExternalLatency, turnframe.Labels{Destination: dest, Outcome: "completed"}, time.Millisecond)
			}
		})
	}
	wg.Wait()

	points := collect(t, reader)
	var claimed, timed int64
	for _, p := range find(points, "turnframe.outbox.claimed") {
		claimed += p.count
	}
	for _, p := range find(points, "messaging.client.operation.duration") {
		timed += p.count
	}
	is.Equal(claimed, int64(goroutines*each)) // every claim counted
	is.Equal(timed, int64(goroutines*each))   // every send timed
}

func TestObserveAllocatesNothingForLabelsSeenBefore(t *testing.T) {
	is := is.New(t)
	obs, err := otelturnframe.NewObserver(noop.NewMeterProvider())
	is.NoErr(err) // new observer
	l := turnframe.Labels{Destination: "payments", Outcome: "http.503"}
	obs.Observe(turnframe.SignalOutboxRetried, l, 0)
	allocs := testing.AllocsPerRun(100, func() {
		obs.Observe(turnframe.SignalOutboxRetried, l, 0)
		obs.Observe(turnframe.SignalExternalLatency, turnframe.Labels{Destination: "payments", Outcome: "retryable"}, time.Millisecond)
	})
	is.Equal(allocs, 0.0) // the attribute sets are built once
}

func TestNewObserverRefusesBadInput(t *testing.T) {
	cases := []struct {
		name string
		mp   metric.MeterProvider
		opts []otelturnframe.Option
	}{
		{"no meter provider", nil, nil},
		{"buckets out of order", noop.NewMeterProvider(), []otelturnframe.Option{otelturnframe.WithDurationBuckets(1, 0.5)}},
		{"a bucket repeated", noop.NewMeterProvider(), []otelturnframe.Option{otelturnframe.WithDurationBuckets(1, 1)}},
		{"a bucket not a number", noop.NewMeterProvider(), []otelturnframe.Option{otelturnframe.WithDurationBuckets(math.NaN())}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			obs, err := otelturnframe.NewObserver(tc.mp, tc.opts...)
			is.True(obs == nil)                           // no observer
			is.True(errors.Is(err, turnframe.ErrInvalid)) // bad input is ErrInvalid
			var inv *turnframe.InvalidError
			is.True(errors.As(err, &inv)) // naming the field
		})
	}
}

func TestHistogramBuckets(t *testing.T) {
	t.Run("the conventions' by default", func(t *testing.T) {
		is := is.New(t)
		obs, reader := newObserved(t)
		obs.Observe(turnframe.SignalExternalLatency, turnframe.Labels{Destination: "payments", Outcome: "completed"}, time.Second)
		obs.Observe(turnframe.SignalCommandDuration, turnframe.Labels{Command: "book", Outcome: "commit"}, time.Second)
		want := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
		is.Equal(histogramBounds(t, reader, "messaging.client.operation.duration"), want) // advised bounds of a send
		is.Equal(histogramBounds(t, reader, "messaging.process.duration"), want)          // advised bounds of a handler call
	})
	t.Run("WithDurationBuckets's when given", func(t *testing.T) {
		is := is.New(t)
		obs, reader := newObserved(t, otelturnframe.WithDurationBuckets(0.5, 1, 2))
		obs.Observe(turnframe.SignalCommandDuration, turnframe.Labels{Command: "book", Outcome: "commit"}, 1500*time.Millisecond)
		is.Equal(histogramBounds(t, reader, "messaging.process.duration"), []float64{0.5, 1, 2}) // the bounds given
	})
}
