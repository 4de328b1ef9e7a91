package turnframe_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// requestKey carries a test's "trace" in a context, as a tracer's span
// would.
type requestKey struct{}

// fromRequest is a WithTraceContext function: the value under requestKey.
func fromRequest(ctx context.Context) string {
	v, _ := ctx.Value(requestKey{}).(string)
	return v
}

// executeOne runs one command on a fresh turn of store under ctx; its
// handler commits msgs. It returns the rows as stored.
func executeOne(t *testing.T, ctx context.Context, rt *turnframe.Runtime, store turnframe.Store, msgs ...turnframe.OutboxMessage) []turnframe.OutboxRecord {
	t.Helper()
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay order 7")
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if _, err := rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "order-7", Case: "order/7", Name: "pay"}}}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	report, err := rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, msgs...)
	}))
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return storedRows(t, ctx, store, report.Results[0].OutboxIDs)
}

// storedRows reads the outbox rows ids names, as stored.
func storedRows(t *testing.T, ctx context.Context, store turnframe.Store, ids []turnframe.OutboxID) []turnframe.OutboxRecord {
	t.Helper()
	var rows []turnframe.OutboxRecord
	for _, id := range ids {
		r, err := store.GetOutbox(ctx, id)
		if err != nil {
			t.Fatalf("get outbox %v: %v", id, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// WithTraceContext stamps each row a commit enqueues with the value its
// function reads from Execute's context, unless the handler set one; a
// value the rule refuses is dropped and the commit still lands; without the
// option, or with a context that carries nothing, rows carry none.
func TestWithTraceContext(t *testing.T) {
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	own := turnframe.OutboxMessage{Destination: "audit", TraceContext: "handler's own"}
	plain := turnframe.OutboxMessage{Destination: "payments"}
	cases := []struct {
		name string
		opts []turnframe.Option
		ctx  string
		want []string // the rows' trace contexts: plain's, then own's
	}{
		{"FillsEmptyOnesFromTheCallersContext", []turnframe.Option{turnframe.WithTraceContext(fromRequest)}, caller, []string{caller, "handler's own"}},
		{"AContextWithoutATraceFillsNothing", []turnframe.Option{turnframe.WithTraceContext(fromRequest)}, "", []string{"", "handler's own"}},
		{"WithoutTheOptionNothingIsFilled", nil, caller, []string{"", "handler's own"}},
		{"AnOversizeValueIsDroppedAndTheCommitLands", []turnframe.Option{turnframe.WithTraceContext(fromRequest)},
			strings.Repeat("x", turnframe.MaxTraceContextLen+1), []string{"", "handler's own"}},
		{"AValueWithANULIsDropped", []turnframe.Option{turnframe.WithTraceContext(fromRequest)}, "a\x00b", []string{"", "handler's own"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			store := memstore.New()
			t.Cleanup(func() { store.Close() })
			rt := turnframe.New(store, tc.opts...)
			ctx := context.WithValue(context.Background(), requestKey{}, tc.ctx)
			rows := executeOne(t, ctx, rt, store, plain, own)
			is.Equal(len(rows), 2)                     // both rows enqueued
			is.Equal(rows[0].TraceContext, tc.want[0]) // the message the handler left empty
			is.Equal(rows[1].TraceContext, tc.want[1]) // the handler's own value stays
		})
	}
}

// A handler that sets a trace context the rule refuses loses the trace
// context, not the commit: refused, the entry would stay Executing and the
// handler run again (an outside attack found the jam; the commit used to be
// ErrInvalid).
func TestAHandlersOversizeTraceContextIsDropped(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	rt := turnframe.New(store)
	ctx := context.Background()
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay")
	is.NoErr(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "order/7", Name: "pay"}}})
	is.NoErr(err)
	bad := turnframe.OutboxMessage{Destination: "payments", TraceContext: strings.Repeat("x", turnframe.MaxTraceContextLen+1)}
	report, err := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler))).Execute(ctx, "acme", turn,
		turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Commit(nil, bad) }))
	is.NoErr(err)                                               // the commit lands
	is.Equal(report.Results[0].Kind, turnframe.ResultCommitted) // committed
	row, err := store.GetOutbox(ctx, report.Results[0].OutboxIDs[0])
	is.NoErr(err)
	is.Equal(row.TraceContext, "") // without the value the rule refuses
}
