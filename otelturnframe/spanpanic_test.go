package otelturnframe_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// panicking is a span processor with a bug: it panics when a span starts
// (onStart) or ends (onEnd), as a synchronous exporter that panics does.
type panicking struct {
	sdktrace.SpanProcessor
	onStart, onEnd bool
}

func (p panicking) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	if p.onStart {
		panic("exporter bug at start")
	}
	p.SpanProcessor.OnStart(parent, s)
}

func (p panicking) OnEnd(s sdktrace.ReadOnlySpan) {
	if p.onEnd {
		panic("exporter bug at end")
	}
	p.SpanProcessor.OnEnd(s)
}

// A span processor that panics is a fault of tracing, not of the send:
// the send is made once and settled by its answer. A panic when the span
// started reached the dispatcher before the send was made, and one when it
// ended after the send had been answered: the dispatcher took both for the
// sender's own panic and settled the row an unknown outcome
// (turnframe.dispatch.sender_panic) — a row never sent, and a row the
// remote had completed, each left for a person to settle by hand.
func TestAPanickingSpanProcessorNeverChangesHowTheRowIsSettled(t *testing.T) {
	for _, c := range []struct {
		name           string
		onStart, onEnd bool
	}{
		{"AtStart", true, false},
		{"AtEnd", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			proc := panicking{SpanProcessor: sdktrace.NewSimpleSpanProcessor(tracetest.NewInMemoryExporter()), onStart: c.onStart, onEnd: c.onEnd}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			var sends atomic.Int32
			sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
				sends.Add(1)
				return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
			})
			report, row := dispatchOnce(t, tp, "pay", sender, turnframe.DefaultDispatchConfig("w1"))
			is.Equal(sends.Load(), int32(1))                // sent once
			is.Equal(settledAs(report), "completed")        // settled by the remote's answer
			is.Equal(row.Status, turnframe.OutboxCompleted) // not an unknown outcome
			is.Equal(row.LastCode, "http.200")              // the remote's code, not the sender_panic
		})
	}
}

// A panic of the wrapped sender itself still goes on up to the dispatcher,
// which settles the row unknown, whatever the span processor does when the
// span ends.
func TestASendersPanicStillReachesTheDispatcherWhenTheSpanCannotEnd(t *testing.T) {
	is := is.New(t)
	proc := panicking{SpanProcessor: sdktrace.NewSimpleSpanProcessor(tracetest.NewInMemoryExporter()), onEnd: true}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		panic("sender bug")
	})
	report, row := dispatchOnce(t, tp, "pay", sender, turnframe.DefaultDispatchConfig("w1"))
	is.Equal(settledAs(report), "unknown")            // the sender's panic
	is.Equal(row.LastCode, turnframe.CodeSenderPanic) // named as such
}
