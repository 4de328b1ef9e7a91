package otelturnframe

import (
	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// step is one measurement one observation makes: a count on counter, or
// the duration on hist, with its attributes.
type step struct {
	counter metric.Int64Counter
	add     []metric.AddOption
	hist    metric.Float64Histogram
	rec     []metric.RecordOption
}

func countOn(c metric.Int64Counter, attrs []attribute.KeyValue) step {
	return step{counter: c, add: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}}
}

func timeOn(h metric.Float64Histogram, attrs []attribute.KeyValue) step {
	return step{hist: h, rec: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}}
}

// route returns what observing s with l records: the table of the package
// doc. A signal it does not know records nothing.
func (in *instruments) route(s turnframe.Signal, l turnframe.Labels) []step {
	var steps []step
	switch s {
	case turnframe.SignalExternalLatency:
		attrs := sendAttrs(l.Destination)
		if l.Outcome != turnframe.DispatchCompleted.String() {
			attrs = append(attrs, semconv.ErrorTypeKey.String(orOther(l.Outcome)))
		}
		steps = append(steps, timeOn(in.sendTime, attrs))
	case turnframe.SignalCommandDuration:
		steps = append(steps, timeOn(in.process, processAttrs(l)))
	case turnframe.SignalOutboxCompleted:
		steps = append(steps, countOn(in.sent, sentAttrs(l, sentCompleted)))
	case turnframe.SignalOutboxRetried:
		if l.Outcome == turnframe.CodeNotSent {
			steps = append(steps, countOn(in.notSent, labelAttrs(turnframe.Labels{Destination: l.Destination})))
			break
		}
		steps = append(steps, countOn(in.sent, sentAttrs(l, sentRetried)))
	case turnframe.SignalOutboxFailed:
		steps = append(steps, countOn(in.sent, sentAttrs(l, sentFailed)))
	case turnframe.SignalExternalOutcomeUnknown:
		if l.Destination != "" {
			steps = append(steps, countOn(in.sent, sentAttrs(l, sentUnknown)))
		}
	}
	if c, ok := in.counters[s]; ok {
		steps = append(steps, countOn(c, labelAttrs(l)))
	}
	return steps
}

// sentAttrs are the attributes of one settled send on
// messaging.client.sent.messages: the send's, the settlement as OutcomeKey,
// and, unless it completed, error.type — the code the row was settled
// with, or the settlement when there is none.
func sentAttrs(l turnframe.Labels, settled string) []attribute.KeyValue {
	attrs := append(sendAttrs(l.Destination), OutcomeKey.String(settled))
	if settled != sentCompleted {
		code := l.Outcome
		if code == "" {
			code = settled
		}
		attrs = append(attrs, semconv.ErrorTypeKey.String(code))
	}
	return attrs
}
