// Package otelturnframe records turnframe's signals as OpenTelemetry
// metrics. It is a module of its own, so that the turnframe module keeps
// its few dependencies; an application that wants the metrics installs an
// Observer on its Runtime, Dispatcher and Recovery:
//
//	obs, err := otelturnframe.NewObserver(meterProvider)
//	…
//	rt := turnframe.New(store, turnframe.WithObserver(obs))
//	d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithObserver(obs))
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
// the same reason. No trace or span id is attached.
//
// # Spans
//
// This package records metrics only. Spans — a send's span linked to the
// trace of the request that enqueued its row — need the caller's trace
// context stored on the outbox row, which the store does not keep yet; they
// come with that change.
package otelturnframe
