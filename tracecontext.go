package turnframe

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
)

// CheckTraceContext returns ErrInvalid unless tc is at most
// MaxTraceContextLen bytes of UTF-8 without a NUL byte: what
// OutboxMessage.TraceContext may hold. Empty is allowed.
func CheckTraceContext(tc string) error {
	return checkString("trace_context", tc, 0, MaxTraceContextLen)
}

// WithTraceContext makes Runtime.Execute stamp the outbox rows a command's
// commit enqueues with f(ctx), ctx being the context Execute was called
// with: each message whose TraceContext the handler left empty gets it, so
// the Sender that sends the row later, in another loop or process, can link
// its send to the request that caused it. f returns "" for a context that
// carries no trace. otelturnframe.TraceContext is such an f; turnframe
// itself never parses the value.
//
// f is called once per commit that enqueues a row, on Execute's goroutine,
// after the handler answered, and must be quick and safe for concurrent
// use. A value CheckTraceContext refuses is dropped with a warning, and so
// is the value of an f that panics (the panic is logged, not passed on), so
// that a tracing fault never costs a commit. A nil f keeps the default: no trace context is captured.
// Only New uses it. An application writing a Write itself (Store.Apply)
// sets OutboxMessage.TraceContext directly.
func WithTraceContext(f func(ctx context.Context) string) Option {
	return func(s *settings) {
		if f != nil {
			s.traceContext = f
		}
	}
}

// withTraceContext returns msgs with the caller's trace context on each
// message that has none, a copy when it changes any: the Outcome's own
// slice is left as the handler built it.
func (rt *Runtime) withTraceContext(ctx context.Context, msgs []OutboxMessage) []OutboxMessage {
	if i := slices.IndexFunc(msgs, func(m OutboxMessage) bool { return CheckTraceContext(m.TraceContext) != nil }); i >= 0 {
		// A trace context the handler set that no store keeps is dropped,
		// not allowed to refuse the commit: tracing is never worth an
		// effect (the command would stay executing and run again).
		msgs = slices.Clone(msgs)
		for i := range msgs {
			if err := CheckTraceContext(msgs[i].TraceContext); err != nil {
				rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a message's trace context dropped", slog.String("error", err.Error()))
				msgs[i].TraceContext = ""
			}
		}
	}
	f := rt.cfg.traceContext
	if f == nil || !slices.ContainsFunc(msgs, func(m OutboxMessage) bool { return m.TraceContext == "" }) {
		return msgs
	}
	tc := rt.callTraceContext(ctx, f)
	if tc == "" {
		return msgs
	}
	if err := CheckTraceContext(tc); err != nil {
		rt.obs.logf(ctx, slog.LevelWarn, "turnframe: trace context dropped", slog.String("error", err.Error()))
		return msgs
	}
	out := slices.Clone(msgs)
	for i := range out {
		if out[i].TraceContext == "" {
			out[i].TraceContext = tc
		}
	}
	return out
}

// callTraceContext returns f(ctx), or "" with a warning when f panics: the
// handler has answered, and a panic out of Execute now would lose its
// outcome, leaving the entry to run again (or be escalated) for a fault of
// tracing.
func (rt *Runtime) callTraceContext(ctx context.Context, f func(context.Context) string) (tc string) {
	defer func() {
		if p := recover(); p != nil {
			rt.obs.logf(ctx, slog.LevelWarn, "turnframe: trace context dropped: the function panicked",
				slog.String("panic", fmt.Sprint(p)))
			tc = ""
		}
	}()
	return f(ctx)
}
