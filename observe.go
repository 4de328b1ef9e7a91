package turnframe

import (
	"context"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"
)

// Signal names something the library measures. Counters are observed with a
// zero duration; timed signals (SignalExternalLatency, SignalCommandDuration)
// carry how long it took.
type Signal string

// The signals (DESIGN.md, "Observability"), prefixed with Signal in Go so that they do not
// collide with the statuses they count. Their values are stable: use them as
// metric names.
const (
	// SignalExternalLatency: one send to a remote, answered, refused or timed out
	// (timed). Labels: Destination, Outcome.
	SignalExternalLatency Signal = "external_latency"
	// SignalExternalOutcomeUnknown: a send or a command that left and got no
	// answer became outcome unknown. Labels: Destination and Outcome (a send:
	// the code the row was settled with, e.g. "http.504" or CodeSendTimeout;
	// empty
	// when the sender gave none) or Command and Outcome (a command:
	// "timeout", "panic", "handler", or "lease_ended" for an attempt that
	// died, or the policy's code of a call Execute withheld:
	// CodeKeyForgotten, CodeRerunWithheld).
	SignalExternalOutcomeUnknown Signal = "external_outcome_unknown"
	// SignalExternalReconciled: an unknown outcome became known (never
	// emitted for an unresolved answer, nor for an escalation to
	// NeedsIntervention, which leaves it unknown until it is settled), so
	// it never outnumbers SignalExternalOutcomeUnknown. Labels: Outcome (the verdict), and
	// Destination for an outbox row or Command for a journal entry.
	SignalExternalReconciled Signal = "external_reconciled"
	// SignalOutboxClaimed: one row claimed by a dispatcher. Labels: Destination.
	SignalOutboxClaimed Signal = "outbox_claimed"
	// SignalOutboxCompleted: one row completed by its remote. Labels: Destination.
	SignalOutboxCompleted Signal = "outbox_completed"
	// SignalOutboxRetried: one row put back with a backoff. Labels: Destination,
	// Outcome (the code).
	SignalOutboxRetried Signal = "outbox_retried"
	// SignalOutboxFailed: one row failed, refused or out of attempts. Labels:
	// Destination, Outcome (the code).
	SignalOutboxFailed Signal = "outbox_failed"
	// SignalCommandCommitted: one command committed. Labels: Command.
	SignalCommandCommitted Signal = "command_committed"
	// SignalCommandRejected: one command rejected. Labels: Command, Outcome (the
	// code).
	SignalCommandRejected Signal = "command_rejected"
	// SignalCommandDuration: one handler call of one attempt ended (timed:
	// from the call to its answer, or to its deadline, by the clock of
	// WithClock). Labels: Command, Outcome — the kind the handler answered
	// ("commit", "reject", "unknown"), or "timeout" or "panic". It is emitted
	// once per call, so a commit run again after its case moved counts each
	// run, and a commit the store then refused counts too; a call the
	// caller's context cut short emits nothing.
	SignalCommandDuration Signal = "command_duration"
	// SignalRecoveryDecided: recovery decided what a turn needs. Labels: Action.
	SignalRecoveryDecided Signal = "recovery_decided"
	// SignalLateAnswer: an answer came after its deadline, or after its
	// claim was lost, and was recorded as evidence (or could not be: then
	// Outcome is "unrecorded"). It moved nothing. Labels: Outcome.
	SignalLateAnswer Signal = "late_answer"
)

// Labels qualify a signal. Empty fields are absent. They never carry an
// account, a key or an id, so a metric's cardinality stays bounded.
type Labels struct {
	Destination string // an outbox row's destination
	Command     string // a command's name
	Outcome     string // an outcome, verdict or code
	Action      string // a recovery action
}

// Observer receives the library's signals. It is called synchronously,
// during the call that emits the signal, which waits for it, on a goroutine
// of its own; possibly several at once, so it must be quick and safe for
// concurrent use. A panic in Observe, or an Observe that ends its goroutine
// (runtime.Goexit, as a test's t.FailNow does), is logged at error level
// and its signal dropped: it never stops a call, a send's settlement or the
// process.
type Observer interface {
	// Observe records one occurrence of s; d is its duration for a timed
	// signal and zero for a counter.
	Observe(s Signal, l Labels, d time.Duration)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(s Signal, l Labels, d time.Duration)

// Observe calls f(s, l, d).
func (f ObserverFunc) Observe(s Signal, l Labels, d time.Duration) { f(s, l, d) }

// discard is the default Observer: it records nothing.
type discard struct{}

func (discard) Observe(Signal, Labels, time.Duration) {}

// defaultLogger is the logger of a Runtime, Dispatcher or Recovery given no
// WithLogger: warnings and errors go to slog.Default() (read at each record,
// so an application that sets its default later is heard), the rest is
// dropped. A handler panic, an unknown outcome or a settlement that could not
// be written is never silent.
func defaultLogger() *slog.Logger { return slog.New(warnToDefault{}) }

// warnToDefault is a slog.Handler passing records at slog.LevelWarn and above
// to slog.Default()'s handler, with the attributes and groups added to it
// replayed in order.
type warnToDefault struct {
	with []func(slog.Handler) slog.Handler
}

func (h warnToDefault) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h warnToDefault) Handle(ctx context.Context, r slog.Record) error {
	out := slog.Default().Handler()
	for _, w := range h.with {
		out = w(out)
	}
	return out.Handle(ctx, r)
}

func (h warnToDefault) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnToDefault{with: append(slices.Clip(h.with), func(o slog.Handler) slog.Handler { return o.WithAttrs(attrs) })}
}

func (h warnToDefault) WithGroup(name string) slog.Handler {
	return warnToDefault{with: append(slices.Clip(h.with), func(o slog.Handler) slog.Handler { return o.WithGroup(name) })}
}

// observer is what Runtime, Dispatcher and Recovery hold to emit signals and
// logs.
type observer struct {
	obs Observer
	log *slog.Logger
}

func (o observer) count(s Signal, l Labels) { o.emit(s, l, 0) }

// emit hands one signal to the Observer. Signals are emitted on goroutines
// the library started (a sweep's senders and settler, a late answer's
// recorder), where the application cannot recover a panic, and between a
// send and its settlement: Observe runs on a goroutine of its own, waited
// for, so that its panic, logged at error level with the signal dropped,
// never ends the process, and its runtime.Goexit never ends the goroutine
// that was to settle a send. The default Observer, which discards, is not
// called at all.
func (o observer) emit(s Signal, l Labels, d time.Duration) {
	if _, ok := o.obs.(discard); ok {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		returned := false
		defer func() {
			if p := recover(); p != nil {
				o.log.Error("turnframe: observer panicked; the signal is dropped",
					slog.String("signal", string(s)), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			} else if !returned {
				o.log.Error("turnframe: observer ended its goroutine (runtime.Goexit); the signal is dropped",
					slog.String("signal", string(s)))
			}
		}()
		o.obs.Observe(s, l, d)
		returned = true
	}()
	<-done
}

// deadAttemptLabels labels SignalExternalOutcomeUnknown for an attempt of
// command name that died and is declared unknown: by Execute, by Recover,
// or by a settlement straight from Executing.
func deadAttemptLabels(name string) Labels { return Labels{Command: name, Outcome: "lease_ended"} }

func (o observer) timed(s Signal, l Labels, d time.Duration) { o.emit(s, l, d) }

func (o observer) logf(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	o.log.LogAttrs(ctx, level, msg, attrs...)
}
