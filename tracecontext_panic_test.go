package turnframe_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// WithTraceContext: "a tracing fault never costs a commit". A trace context
// function with a bug that panics (a tracer read before it was set up)
// panicked out of Execute after the handler had run and before its outcome
// was written: the commit was lost, and the entry, left Executing, was run
// again at its lease's end (or, for a Remote that forbids it, declared
// unknown and escalated) though the handler had answered. The panic now
// costs the trace context only, with a warning.
func TestATraceContextFunctionThatPanicsCostsOnlyTheTraceContext(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	var tracer map[string]string // never made: the first write panics
	trace := func(context.Context) string {
		tracer["last"] = "x"
		return "x"
	}
	rt := turnframe.New(store, turnframe.WithTraceContext(trace), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "order/7", Name: "pay"}}})
	is.NoErr(err)
	ran := 0
	var report turnframe.ExecuteReport
	panicked := func() (p any) {
		defer func() { p = recover() }()
		report, err = rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			ran++
			return turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "payments", Payload: []byte("x")})
		}))
		return nil
	}()
	is.Equal(fmt.Sprint(panicked), "<nil>")                     // Execute answers
	is.NoErr(err)                                               // the commit lands
	is.Equal(ran, 1)                                            // the handler ran once
	is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // committed
	row, err := store.GetOutbox(ctx, report.Results[0].OutboxIDs[0])
	is.NoErr(err)
	is.Equal(row.TraceContext, "") // without a trace context
}
