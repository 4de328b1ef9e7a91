// Package otelturnframe records turnframe's signals as OpenTelemetry
// metrics, and its sends as spans linked to the requests that caused them.
// It is a module of its own, so that the turnframe module keeps its few
// dependencies; an application that wants the metrics installs an Observer
// on its Runtime, Dispatcher and Recovery, and one that wants the spans
// stores the trace context on each row and wraps its Sender:
//
//	obs, err := otelturnframe.NewObserver(meterProvider)
//	…
//	rt := turnframe.New(store, turnframe.WithObserver(obs),
//		turnframe.WithTraceContext(otelturnframe.TraceContext))
//	d := turnframe.NewDispatcher(store, otelturnframe.WrapSender(sender, tracerProvider), cfg,
//		turnframe.WithObserver(obs))
//
// # Instruments
//
// The instruments follow the OpenTelemetry semantic conventions for
// messaging metrics (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-metrics/,
// semconv 1.43.0): an outbox row is a message a producer sends to its
// destination, and a handler call is the processing of a command. Each
// messaging.* measurement carries messaging.system = "turnframe" (System)
// and messaging.operation.name and messaging.operation.type: "send" for a
// send, "process" for a handler call. The signals the conventions have no
// instrument for are counters named turnframe.*. Each signal becomes:
//
//	signal                      instrument                           kind, unit               attributes
//	SignalExternalLatency       messaging.client.operation.duration  histogram, s             destination; error.type = the kind unless completed
//	SignalOutboxCompleted       messaging.client.sent.messages       counter, {message}       destination; turnframe.outcome = completed
//	SignalOutboxRetried         messaging.client.sent.messages       counter, {message}       destination; turnframe.outcome = retried; error.type = the code
//	  with CodeNotSent          turnframe.outbox.not_sent            counter, {row}           destination
//	SignalOutboxFailed          messaging.client.sent.messages       counter, {message}       destination; turnframe.outcome = failed; error.type = the code
//	SignalExternalOutcomeUnknown
//	  of a row (Destination)    messaging.client.sent.messages       counter, {message}       destination; turnframe.outcome = unknown; error.type = the code, else unknown
//	  always, also              turnframe.external.outcome_unknown   counter, {outcome}       the labels
//	SignalCommandDuration       messaging.process.duration           histogram, s             turnframe.command; turnframe.outcome; error.type unless commit or reject
//	SignalOutboxClaimed         turnframe.outbox.claimed             counter, {row}           the labels
//	SignalExternalReconciled    turnframe.external.reconciled        counter, {outcome}       the labels
//	SignalCommandCommitted      turnframe.command.committed          counter, {command}       the labels
//	SignalCommandRejected       turnframe.command.rejected           counter, {command}       the labels
//	SignalRecoveryDecided       turnframe.recovery.decided           counter, {decision}      the labels
//	SignalLateAnswer            turnframe.late_answer                counter, {answer}        the labels
//
// "destination" is messaging.destination.name. "The labels" are the
// signal's turnframe.Labels, each one that is not empty: Destination as
// messaging.destination.name, Command as turnframe.command (CommandKey),
// Outcome as turnframe.outcome (OutcomeKey), Action as
// turnframe.recovery.action (ActionKey). A signal not in the table records
// nothing.
//
// messaging.client.sent.messages counts each send once, when its row is
// settled in one of the four ways — completed, retried, failed, unknown —
// which turnframe.outcome names; a row whose send never started (the
// dispatcher's context ended first) was not sent, and the conventions say
// not to count it there: it counts on turnframe.outbox.not_sent. error.type
// is the code the row was settled with (a Sender's code, or one of
// turnframe's Code* constants), or the settlement when there is none.
// The two histograms use the bucket boundaries the conventions advise
// (DefaultDurationBuckets) unless WithDurationBuckets says otherwise.
//
// # Cardinality
//
// Attributes come from turnframe.Labels only, which never carry an
// account, a key or an id; a Sender's codes must be short and stable for
// the same reason. No trace or span id is attached to a measurement.
//
// # Spans
//
// A send is made long after, and often far from, the request whose
// command enqueued its row. TraceContext writes the span context of that
// request as the row's trace context (a W3C traceparent, and its
// tracestate when both fit turnframe.MaxTraceContextLen bytes), which
// turnframe.WithTraceContext stores on every row the command enqueues; the
// stores keep it with the row. WrapSender starts a Client span per send,
// "send <destination>", linked to that span context: a link, not a parent,
// since the send is not part of the request (it may run once per attempt,
// hours later, in another process), as the messaging conventions advise
// for a send whose message was created elsewhere. The span carries the
// send's attributes of the metrics above, messaging.message.id (the row's
// id) and AttemptKey, and ends with the settlement as turnframe.outcome,
// error.type unless completed, and the status Error for failed and
// unknown. A row without a trace context, or with one that holds no
// valid traceparent, is sent in a span without a link. The span ends
// within the send's deadline, so its processors must not block (see
// WrapSender).
//
// Ids live on spans, never on the metrics: a span is one event, so an id
// there costs no cardinality.
package otelturnframe
