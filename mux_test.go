package turnframe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// muxCall is a call of a command named name.
func muxCall(name string) turnframe.Call {
	return turnframe.Call{Account: rtAccount, Command: turnframe.Command{Key: "k-" + turnframe.IdempotencyKey(name), Case: "flight/7", Name: name}}
}

// muxNamed returns a mux whose handlers answer Reject(name) for the names
// given, so an outcome says which handler gave it.
func muxNamed(names ...string) *turnframe.Mux {
	var m turnframe.Mux
	for _, name := range names {
		m.RegisterFunc(name, func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Reject("by_" + name) })
	}
	return &m
}

func TestMuxHandsEachCommandToTheHandlerOfItsName(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mux      *turnframe.Mux
		command  string
		wantCode string
	}{
		{"the handler of the name answers", muxNamed("book", "charge"), "charge", "by_charge"},
		{"another name's handler is not called", muxNamed("book", "charge"), "book", "by_book"},
		{"a name with no handler is rejected with the stable code", muxNamed("book"), "refund", turnframe.CodeNoHandler},
		{"a name differing only in case has no handler", muxNamed("book"), "Book", turnframe.CodeNoHandler},
		{"the zero mux rejects every name", &turnframe.Mux{}, "book", turnframe.CodeNoHandler},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			out := tt.mux.Handle(context.Background(), muxCall(tt.command))
			is.Equal(out.Kind(), turnframe.OutcomeReject) // the handler's outcome, or the mux's reject
			is.Equal(out.Code(), tt.wantCode)             // from the handler of the name
		})
	}
}

func TestMuxRegistrationPanicsOnAProgrammingError(t *testing.T) {
	ok := func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Reject("") }
	for _, tt := range []struct {
		name     string
		register func(m *turnframe.Mux)
		want     string // in the panic's message
	}{
		{"an empty name", func(m *turnframe.Mux) { m.RegisterFunc("", ok) }, "name"},
		{"a name no command can have", func(m *turnframe.Mux) { m.RegisterFunc(strings.Repeat("n", turnframe.MaxNameLen+1), ok) }, "name"},
		{"a second handler for a name", func(m *turnframe.Mux) { m.RegisterFunc("book", ok); m.RegisterFunc("book", ok) }, "second handler for book"},
		{"a nil handler", func(m *turnframe.Mux) { m.Register("book", nil) }, "nil handler"},
		{"a nil function", func(m *turnframe.Mux) { m.RegisterFunc("book", nil) }, "nil function"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var m turnframe.Mux
			got := func() (msg string) {
				defer func() { msg, _ = recover().(string) }()
				tt.register(&m)
				return ""
			}()
			is.True(strings.Contains(got, tt.want)) // panics, saying why
		})
	}
}

func TestMuxUnderExecuteRejectsAnUnhandledNameAndRunsTheOthers(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rec := &recorder{}
		rt := turnframe.New(store, turnframe.WithObserver(rec))
		var mux turnframe.Mux
		mux.Register("book", rtNewHandler(rtScript))
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"), rtCmd("k-refund", "flight/7", "refund"))

		report, err := rt.Execute(ctx, rtAccount, turn, &mux)
		is.NoErr(err) // execute
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultCommitted, turnframe.ResultRejected})
		is.Equal(report.Results[1].Code, turnframe.CodeNoHandler)             // rejected with the stable code
		is.Equal(report.Phase, turnframe.PhaseCommitted)                      // the turn goes on
		is.Equal(rtEntry(t, store, "k-refund").Code, turnframe.CodeNoHandler) // as the journal keeps it
		is.Equal(rec.labels(turnframe.SignalCommandRejected), []turnframe.Labels{{Command: "refund", Outcome: turnframe.CodeNoHandler}})
	})
}
