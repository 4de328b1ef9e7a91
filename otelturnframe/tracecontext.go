package otelturnframe

import (
	"context"
	"strings"

	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context fields, as propagation.TraceContext names them.
const (
	traceparentField = "traceparent"
	tracestateField  = "tracestate"
)

// TraceContext returns the span context ctx carries as the value of a
// turnframe.OutboxMessage.TraceContext: its W3C traceparent, followed by
// ";" and its tracestate when it has one and the two fit in
// turnframe.MaxTraceContextLen bytes (the traceparent alone otherwise). It
// returns "" when ctx carries no valid span context. It reads no global
// propagator: the format is the one WrapSender reads back, whatever the
// application propagates elsewhere.
//
// It is the function an application gives turnframe.WithTraceContext, so
// that each row a command enqueues carries the trace of the request that
// ran it:
//
//	rt := turnframe.New(store, turnframe.WithTraceContext(otelturnframe.TraceContext))
func TraceContext(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	parent := carrier.Get(traceparentField)
	if parent == "" {
		return ""
	}
	if state := carrier.Get(tracestateField); state != "" && len(parent)+1+len(state) <= turnframe.MaxTraceContextLen {
		return parent + ";" + state
	}
	return parent
}

// spanContextOf reads a value TraceContext wrote back into the span
// context it came from, marked remote. ok is false for "" and for a value
// that holds no valid traceparent; a tracestate that does not parse is
// left out. A traceparent holds no ";", so the first one ends it.
func spanContextOf(tc string) (sc trace.SpanContext, ok bool) {
	if tc == "" {
		return trace.SpanContext{}, false
	}
	parent, state, _ := strings.Cut(tc, ";")
	carrier := propagation.MapCarrier{traceparentField: parent, tracestateField: state}
	sc = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	return sc, sc.IsValid()
}
