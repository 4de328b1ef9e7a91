package otelturnframe_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/otelturnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// newTraced returns a TracerProvider that exports every span, as it ends,
// to the in-memory exporter it returns.
func newTraced(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// attrs returns a span's attributes as text, by key.
func attrs(s tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// spansNamed returns the exported spans by name; a name seen twice fails.
func spansNamed(t *testing.T, exp *tracetest.InMemoryExporter) map[string]tracetest.SpanStub {
	t.Helper()
	out := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if _, dup := out[s.Name]; dup {
			t.Fatalf("two spans named %q", s.Name)
		}
		out[s.Name] = s
	}
	return out
}

// spanContext returns a valid span context with the given tracestate.
func spanContext(t *testing.T, state string) trace.SpanContext {
	t.Helper()
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatalf("tracestate %q: %v", state, err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
}

func TestTraceContext(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	long := "a=" + strings.Repeat("x", 250) + ",b=" + strings.Repeat("y", 250) // fits a tracestate, not the bound beside a traceparent
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"NoSpanGivesNothing", context.Background(), ""},
		{"ASpanGivesItsTraceparent", trace.ContextWithSpanContext(context.Background(), spanContext(t, "")), parent},
		{"ATracestateFollowsASemicolon", trace.ContextWithSpanContext(context.Background(), spanContext(t, "vendor=a1,other=b;2")), parent + ";vendor=a1,other=b;2"},
		{"ATracestateOverTheBoundIsLeftOut", trace.ContextWithSpanContext(context.Background(), spanContext(t, long)), parent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got := otelturnframe.TraceContext(tc.ctx)
			is.Equal(got, tc.want)                            // the value
			is.NoErr(turnframe.CheckTraceContext(got))        // a row takes it
			is.True(len(got) <= turnframe.MaxTraceContextLen) // within the bound
		})
	}
}

// order is the handler of the span tests: one row to each destination
// ok, flaky, refused and hang, and one to "mangled" whose trace context
// the handler set to something that is no traceparent.
func order(_ context.Context, call turnframe.Call) turnframe.Outcome {
	var msgs []turnframe.OutboxMessage
	for _, dest := range []string{"ok", "flaky", "refused", "hang"} {
		msgs = append(msgs, turnframe.OutboxMessage{Destination: dest, Payload: []byte(dest)})
	}
	if call.Command.Name == "untraced" {
		msgs = []turnframe.OutboxMessage{{Destination: "untraced"}}
	} else {
		msgs = append(msgs, turnframe.OutboxMessage{Destination: "mangled", TraceContext: "00-not-a-traceparent"})
	}
	return turnframe.Commit(nil, msgs...)
}

// answer is the sender of the span tests, by destination.
func answer(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	switch e.Destination {
	case "flaky":
		return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"}
	case "refused":
		return turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.400"}
	case "hang":
		return turnframe.Dispatched{Kind: turnframe.DispatchUnknown} // no code: error.type is the settlement
	}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// runCommand receives, plans and executes one command named name under
// ctx.
func runCommand(t *testing.T, ctx context.Context, rt *turnframe.Runtime, name string) {
	t.Helper()
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "order it")
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	cmd := turnframe.Command{Key: turnframe.IdempotencyKey("k-" + name), Case: "order/1", Name: name}
	if _, err := rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{cmd}}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if _, err := rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(order)); err != nil {
		t.Fatalf("execute: %v", err)
	}
}

// Rows enqueued under a request's span are sent, by a dispatcher with a
// wrapped sender, in spans linked to that span, not children of it, with
// the conventions' attributes and each answer's settlement; a row with no
// trace context, or one that is no traceparent, gets a span without a
// link. Over memstore, and over a SQLite file, where the trace context
// goes through the column and back.
func TestSendSpansLinkToTheSpanThatEnqueued(t *testing.T) {
	stores := map[string]func(t *testing.T) turnframe.Store{
		"memstore": func(t *testing.T) turnframe.Store {
			s := memstore.New()
			t.Cleanup(func() { s.Close() })
			return s
		},
		"sqlitestore": func(t *testing.T) turnframe.Store {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "app.db"))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			tp, exp := newTraced(t)
			store := open(t)
			rt := turnframe.New(store, turnframe.WithTraceContext(otelturnframe.TraceContext))
			ctx, request := tp.Tracer("app").Start(context.Background(), "request")
			runCommand(t, ctx, rt, "order")
			request.End()
			runCommand(t, context.Background(), rt, "untraced") // no span in its context

			d := turnframe.NewDispatcher(store, otelturnframe.WrapSender(turnframe.SenderFunc(answer), tp), turnframe.DefaultDispatchConfig("worker-1"))
			report, err := d.RunOnce(context.Background(), time.Now())
			is.NoErr(err)
			is.Equal(report.Claimed(), 6) // every row sent once

			spans := spansNamed(t, exp)
			enqueued := spans["request"].SpanContext
			is.True(enqueued.IsValid()) // the request's span was exported
			want := map[string]struct {
				outcome, errorType string
				status             codes.Code
			}{
				"ok":      {"completed", "", codes.Unset},
				"flaky":   {"retried", "http.503", codes.Unset},
				"refused": {"failed", "http.400", codes.Error},
				"hang":    {"unknown", "unknown", codes.Error},
			}
			for dest, w := range want {
				s, ok := spans["send "+dest]
				is.True(ok)                                                    // a span per send, named for its destination
				is.Equal(s.SpanKind, trace.SpanKindClient)                     // a client span
				is.True(!s.Parent.IsValid())                                   // not a child of the request
				is.Equal(len(s.Links), 1)                                      // one link
				is.Equal(s.Links[0].SpanContext.TraceID(), enqueued.TraceID()) // to the request's trace
				is.Equal(s.Links[0].SpanContext.SpanID(), enqueued.SpanID())   // and span
				a := attrs(s)
				is.Equal(a["messaging.system"], "turnframe")
				is.Equal(a["messaging.operation.name"], "send")
				is.Equal(a["messaging.operation.type"], "send")
				is.Equal(a["messaging.destination.name"], dest)
				is.True(regexp.MustCompile(`^[0-9A-Z]{26}$`).MatchString(a["messaging.message.id"])) // the row's id
				is.Equal(a["turnframe.attempt"], "1")
				is.Equal(a["turnframe.outcome"], w.outcome) // the settlement
				et, has := a["error.type"]
				is.Equal(has, w.errorType != "") // error.type unless completed
				is.Equal(et, w.errorType)
				is.Equal(s.Status.Code, w.status) // Error for failed and unknown
			}
			for _, dest := range []string{"mangled", "untraced"} {
				s, ok := spans["send "+dest]
				is.True(ok)               // sent in a span
				is.Equal(len(s.Links), 0) // with no link
				is.Equal(attrs(s)["turnframe.outcome"], "completed")
			}
			// The row's id on the span is the row's.
			rows, err := store.ListOutbox(context.Background(), turnframe.OutboxFilter{Limit: 10})
			is.NoErr(err)
			is.Equal(attrs(spans["send "+rows[0].Destination])["messaging.message.id"], rows[0].ID.String())
		})
	}
}

// An answer given after the send's context ended is not taken by the
// dispatcher: the span says unknown, as the row will be.
func TestALateAnswerEndsItsSpanUnknown(t *testing.T) {
	is := is.New(t)
	tp, exp := newTraced(t)
	s := otelturnframe.WrapSender(turnframe.SenderFunc(answer), tp)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := s.Send(ctx, turnframe.OutboxEntry{Destination: "ok", Attempts: 2})
	is.Equal(got.Kind, turnframe.DispatchCompleted) // the answer is passed on unchanged
	span := spansNamed(t, exp)["send ok"]
	a := attrs(span)
	is.Equal(a["turnframe.outcome"], "unknown")
	is.Equal(a["error.type"], turnframe.CodeSendTimeout)
	is.Equal(a["turnframe.attempt"], "2")
	is.Equal(span.Status.Code, codes.Error)
}

// A send that panics ends its span unknown, and the panic goes on.
func TestAPanickingSendEndsItsSpan(t *testing.T) {
	is := is.New(t)
	tp, exp := newTraced(t)
	s := otelturnframe.WrapSender(turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		panic("boom")
	}), tp)
	func() {
		defer func() { is.Equal(recover(), "boom") }() // the panic goes on up
		s.Send(context.Background(), turnframe.OutboxEntry{Destination: "ok"})
	}()
	span := spansNamed(t, exp)["send ok"]
	is.Equal(attrs(span)["error.type"], turnframe.CodeSenderPanic)
	is.Equal(span.Status.Code, codes.Error)
	is.True(!span.EndTime.IsZero()) // ended
}
