package otelturnframe

import (
	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The attributes of turnframe's own, for what the semantic conventions have
// no attribute for.
const (
	// CommandKey is a command's name (turnframe.Labels.Command).
	CommandKey = attribute.Key("turnframe.command")
	// OutcomeKey is how something ended (turnframe.Labels.Outcome); on
	// messaging.client.sent.messages, one of the four settlements:
	// "completed", "retried", "failed", "unknown".
	OutcomeKey = attribute.Key("turnframe.outcome")
	// ActionKey is what recovery decided a turn needs
	// (turnframe.Labels.Action).
	ActionKey = attribute.Key("turnframe.recovery.action")
)

// System is the value of messaging.system on the messaging.* instruments.
const System = "turnframe"

// The four settlements of a send, as OutcomeKey values.
const (
	sentCompleted = "completed"
	sentRetried   = "retried"
	sentFailed    = "failed"
	sentUnknown   = "unknown"
)

// errorTypeOther is the conventions' fallback value of error.type.
const errorTypeOther = "_OTHER"

// labelAttrs turns l into attributes, one per field that is not empty:
// Destination as messaging.destination.name, Command, Outcome and Action
// under turnframe's keys.
func labelAttrs(l turnframe.Labels) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 4)
	if l.Destination != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(l.Destination))
	}
	if l.Command != "" {
		attrs = append(attrs, CommandKey.String(l.Command))
	}
	if l.Outcome != "" {
		attrs = append(attrs, OutcomeKey.String(l.Outcome))
	}
	if l.Action != "" {
		attrs = append(attrs, ActionKey.String(l.Action))
	}
	return attrs
}

// sendAttrs are the attributes of a send on the messaging.* instruments:
// the system, the operation ("send", of type send) and the destination.
func sendAttrs(destination string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName("send"),
		semconv.MessagingOperationTypeSend,
	}
	if destination != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(destination))
	}
	return attrs
}

// processAttrs are the attributes of a handler call on
// messaging.process.duration: the system, the operation ("process", of type
// process), the command's name and the outcome.
func processAttrs(l turnframe.Labels) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		CommandKey.String(l.Command),
		OutcomeKey.String(l.Outcome),
	}
	switch l.Outcome {
	case "commit", "reject": // an answer: the handler did its work
	default:
		attrs = append(attrs, semconv.ErrorTypeKey.String(orOther(l.Outcome)))
	}
	return attrs
}

// orOther returns s, or the conventions' fallback when s is empty.
func orOther(s string) string {
	if s == "" {
		return errorTypeOther
	}
	return s
}
