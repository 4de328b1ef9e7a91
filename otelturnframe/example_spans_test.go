package otelturnframe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/otelturnframe"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A command runs under a request's span; the Runtime stores that span's
// trace context on the row it enqueues, and the wrapped Sender's span,
// later, links back to it.
func ExampleWrapSender() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithTraceContext(otelturnframe.TraceContext))
	ctx, request := tp.Tracer("app").Start(context.Background(), "POST /chat")
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book it")
	check(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k-1", Case: "flight/7", Name: "book"}}})
	check(err)
	_, err = rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "payments"})
	}))
	check(err)
	request.End()

	sender := otelturnframe.WrapSender(turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	}), tp)
	_, err = turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("worker-1")).RunOnce(context.Background(), time.Now())
	check(err)

	spans := exp.GetSpans()
	req, send := spans[0], spans[1]
	fmt.Println(send.Name, send.SpanKind)
	fmt.Println("links to", req.Name+":", send.Links[0].SpanContext.SpanID() == req.SpanContext.SpanID())
	fmt.Println("child of it:", send.Parent.SpanID() == req.SpanContext.SpanID())
	// Output:
	// send payments client
	// links to POST /chat: true
	// child of it: false
}
