package otelturnframe

import (
	"fmt"

	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// ScopeName is the instrumentation scope of the Observer's meter.
const ScopeName = "github.com/turnframe/turnframe/otelturnframe"

// instruments are the Observer's instruments, created once by NewObserver
// and only read afterwards.
type instruments struct {
	sent     metric.Int64Counter     // messaging.client.sent.messages
	sendTime metric.Float64Histogram // messaging.client.operation.duration
	process  metric.Float64Histogram // messaging.process.duration
	notSent  metric.Int64Counter     // turnframe.outbox.not_sent
	// counters are the turnframe.* counters by the signal they count.
	counters map[turnframe.Signal]metric.Int64Counter
}

// counterSpec describes one turnframe.* counter.
type counterSpec struct {
	signal      turnframe.Signal
	name, unit  string
	description string
}

// counterSpecs are the counters of the signals the conventions have no
// instrument for.
func counterSpecs() []counterSpec {
	return []counterSpec{
		{turnframe.SignalOutboxClaimed, "turnframe.outbox.claimed", "{row}", "Outbox rows claimed by a dispatcher."},
		{turnframe.SignalExternalOutcomeUnknown, "turnframe.external.outcome_unknown", "{outcome}", "Sends and commands that left and got no answer."},
		{turnframe.SignalExternalReconciled, "turnframe.external.reconciled", "{outcome}", "Unknown outcomes that became known."},
		{turnframe.SignalCommandCommitted, "turnframe.command.committed", "{command}", "Commands committed."},
		{turnframe.SignalCommandRejected, "turnframe.command.rejected", "{command}", "Commands rejected."},
		{turnframe.SignalRecoveryDecided, "turnframe.recovery.decided", "{decision}", "Recovery's decisions about what a turn needs."},
		{turnframe.SignalLateAnswer, "turnframe.late_answer", "{answer}", "Answers that came after their deadline or their claim."},
	}
}

// newInstruments creates every instrument on m.
func newInstruments(m metric.Meter, c config) (instruments, error) {
	buckets := metric.WithExplicitBucketBoundaries(c.buckets...)
	var in instruments
	sent, err := messagingconv.NewClientSentMessages(m)
	if err != nil {
		return instruments{}, fmt.Errorf("create %s: %w", sent.Name(), err)
	}
	sendTime, err := messagingconv.NewClientOperationDuration(m, buckets)
	if err != nil {
		return instruments{}, fmt.Errorf("create %s: %w", sendTime.Name(), err)
	}
	process, err := messagingconv.NewProcessDuration(m, buckets)
	if err != nil {
		return instruments{}, fmt.Errorf("create %s: %w", process.Name(), err)
	}
	in.sent, in.sendTime, in.process = sent.Inst(), sendTime.Inst(), process.Inst()
	in.notSent, err = m.Int64Counter("turnframe.outbox.not_sent", metric.WithUnit("{row}"),
		metric.WithDescription("Claimed outbox rows put back unsent because the dispatcher's context ended."))
	if err != nil {
		return instruments{}, fmt.Errorf("create turnframe.outbox.not_sent: %w", err)
	}
	in.counters = make(map[turnframe.Signal]metric.Int64Counter)
	for _, s := range counterSpecs() {
		ctr, err := m.Int64Counter(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.description))
		if err != nil {
			return instruments{}, fmt.Errorf("create %s: %w", s.name, err)
		}
		in.counters[s.signal] = ctr
	}
	return in, nil
}

// meterOf returns the Observer's meter from mp.
func meterOf(mp metric.MeterProvider) metric.Meter {
	return mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
}
