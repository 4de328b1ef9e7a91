package otelturnframe

import (
	"context"
	"fmt"

	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// AttemptKey is the attempt number of a send (turnframe.OutboxEntry.Attempts)
// on its span.
const AttemptKey = attribute.Key("turnframe.attempt")

// WrapSender returns a turnframe.Sender that sends each row through next
// inside a span of a tracer of tp named ScopeName, and passes next's answer
// on unchanged. It panics if next or tp is nil, or holds a nil pointer or
// func (a nil *turnframe.HTTPSender: the turnframe.Dispatcher's own check
// sees the wrapper, not next): a programming error, found at start-up.
//
// The span follows the messaging semantic conventions for a send: it is
// named "send " and the destination, of kind Client, and carries
// messaging.system = "turnframe", messaging.operation.name and
// messaging.operation.type = "send", messaging.destination.name,
// messaging.message.id (the row's id) and AttemptKey. It is the parent of
// whatever next does under its context (an instrumented HTTP client's
// span, and the trace headers it sends).
//
// It links to the span context stored on the row (OutboxEntry.TraceContext,
// as TraceContext wrote it when the row was enqueued): a link, not a
// parent, because the send happens later, in a dispatcher's loop or another
// process, once per attempt, and is not part of the request that enqueued
// the row; the conventions link a send whose message was created elsewhere
// to that creation context. A row without a trace context, or with one that
// holds no valid traceparent, gets no link.
//
// The span ends when next returns, with OutcomeKey the settlement the
// answer asks for: "completed", "retried" (DispatchRetryable: the
// dispatcher settles it Failed instead when the row's attempts are spent),
// "failed" (DispatchPermanent) or "unknown" (DispatchUnknown, a kind out of
// range, or an answer given after ctx ended, which the dispatcher does not
// take: error.type is then turnframe.CodeSendTimeout). Unless completed it
// carries error.type: the code the row is settled with — the answer's code
// as the dispatcher keeps it (turnframe.SenderCode: a code that is the
// library's, or that no store keeps, becomes turnframe.CodeInvalidCode) —
// or the settlement when there is none; its status is Error, described by
// that code, for failed and unknown. A next that panics ends the span
// unknown with error.type turnframe.CodeSenderPanic, and the panic goes on
// up to the dispatcher. A span that cannot start or end (a sampler, span
// processor or synchronous exporter that panics) is a fault of tracing:
// it is reported to otel.Handle, and the send is made (untraced, when the
// span could not start) and settled by its answer, never taken for the
// sender's panic.
//
// The span ends inside the send, before Send returns, so its span
// processors run within the send's deadline
// (turnframe.DispatchConfig.SendTimeout) and must not block: use the SDK's
// batch span processor (sdktrace.WithBatcher), never a synchronous one over
// a slow exporter. A processor that holds End past the deadline spends the
// send's own time: the dispatcher then takes no answer and settles the row
// OutcomeUnknown (turnframe.CodeSendTimeout), while the span, ended before
// the dispatcher decides, says what the answer asked for. A completed send
// is then made an unknown one, and its span does not say so.
func WrapSender(next turnframe.Sender, tp trace.TracerProvider) turnframe.Sender {
	if isNil(next) {
		panic("otelturnframe: WrapSender with a nil sender")
	}
	if isNil(tp) {
		panic("otelturnframe: WrapSender with a nil TracerProvider")
	}
	return tracedSender{next: next, tracer: tp.Tracer(ScopeName)}
}

// tracedSender is the Sender WrapSender returns.
type tracedSender struct {
	next   turnframe.Sender
	tracer trace.Tracer
}

// Send sends entry through the wrapped sender inside a span, as WrapSender
// says.
func (s tracedSender) Send(ctx context.Context, entry turnframe.OutboxEntry) (d turnframe.Dispatched) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(sendAttrs(entry.Destination),
			semconv.MessagingMessageID(entry.ID.String()), AttemptKey.Int(entry.Attempts))...),
	}
	if sc, ok := spanContextOf(entry.TraceContext); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	spanCtx, span, ok := s.start(ctx, "send "+entry.Destination, opts)
	if !ok {
		return s.next.Send(ctx, entry) // sent untraced: the span could not start
	}
	defer func() {
		if p := recover(); p != nil {
			endSpan(span, sentUnknown, turnframe.CodeSenderPanic)
			panic(p)
		}
		outcome, errorType := settlementOf(spanCtx, d)
		endSpan(span, outcome, errorType)
	}()
	return s.next.Send(spanCtx, entry)
}

// start starts the send's span; ok is false when the tracer panicked (a
// sampler's or span processor's bug), which is reported to otel.Handle.
// A tracing fault must not reach the dispatcher, which would take it for
// the sender's panic and settle a row never sent an unknown outcome.
func (s tracedSender) start(ctx context.Context, name string, opts []trace.SpanStartOption) (_ context.Context, _ trace.Span, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			otel.Handle(fmt.Errorf("otelturnframe: starting the span %q panicked: %v", name, p))
			ok = false
		}
	}()
	ctx, span := s.tracer.Start(ctx, name, opts...)
	return ctx, span, true
}

// settlementOf returns the settlement the dispatcher makes of d, answered
// under ctx, as an OutcomeKey value, and its error.type ("" when
// completed): the code the dispatcher keeps (turnframe.SenderCode).
func settlementOf(ctx context.Context, d turnframe.Dispatched) (outcome, errorType string) {
	if ctx.Err() != nil {
		return sentUnknown, turnframe.CodeSendTimeout
	}
	switch d.Kind {
	case turnframe.DispatchCompleted:
		return sentCompleted, ""
	case turnframe.DispatchRetryable:
		outcome = sentRetried
	case turnframe.DispatchPermanent:
		outcome = sentFailed
	default:
		outcome = sentUnknown
	}
	if d.Code == "" {
		return outcome, outcome
	}
	return outcome, turnframe.SenderCode(d.Code)
}

// endSpan records the outcome on span and ends it. A panic while it does
// (a span processor's or exporter's bug) is reported to otel.Handle, not
// passed on: the send has been answered, and the dispatcher would take the
// panic for the sender's and settle the row an unknown outcome.
func endSpan(span trace.Span, outcome, errorType string) {
	defer func() {
		if p := recover(); p != nil {
			otel.Handle(fmt.Errorf("otelturnframe: ending a send's span panicked: %v", p))
		}
	}()
	span.SetAttributes(OutcomeKey.String(outcome))
	if errorType != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
	}
	if outcome == sentFailed || outcome == sentUnknown {
		span.SetStatus(codes.Error, errorType)
	}
	span.End()
}
