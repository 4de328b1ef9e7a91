package otelturnframe_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/otelturnframe"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// enqueueOne commits one command that enqueues one row to dest.
func enqueueOne(t *testing.T, store turnframe.Store, dest string) {
	t.Helper()
	ctx := context.Background()
	rt := turnframe.New(store)
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "go")
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	cmd := turnframe.Command{Key: "k-" + turnframe.IdempotencyKey(dest), Case: "order/1", Name: "order"}
	if _, err := rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{cmd}}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if _, err := rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, turnframe.OutboxMessage{Destination: dest, Payload: []byte("x")})
	})); err != nil {
		t.Fatalf("execute: %v", err)
	}
}

// dispatchOnce enqueues one row to dest in a new store and sends it once
// through sender wrapped by WrapSender over tp, under cfg. It returns the
// report and the row as settled.
func dispatchOnce(t *testing.T, tp *sdktrace.TracerProvider, dest string, sender turnframe.Sender, cfg turnframe.DispatchConfig) (turnframe.DispatchReport, turnframe.OutboxRecord) {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	enqueueOne(t, store, dest)
	d := turnframe.NewDispatcher(store, otelturnframe.WrapSender(sender, tp), cfg, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	report, err := d.RunOnce(context.Background(), time.Now())
	if err != nil {
		t.Fatalf("run once: %v", err)
	}
	rows, err := store.ListOutbox(context.Background(), turnframe.OutboxFilter{Limit: 10})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list outbox: %d rows, %v", len(rows), err)
	}
	return report, rows[0]
}

// settledAs names how report settled its one row, as turnframe.outcome does.
func settledAs(report turnframe.DispatchReport) string {
	switch {
	case len(report.Completed) == 1:
		return "completed"
	case len(report.Retried) == 1:
		return "retried"
	case len(report.Failed) == 1:
		return "failed"
	case len(report.Unknown) == 1:
		return "unknown"
	}
	return "unsettled"
}

// A send span's error.type is the code the row was settled with: the
// dispatcher replaces a Sender's code that is the library's ("turnframe."),
// not UTF-8 or over 200 bytes with CodeInvalidCode, and so does the span —
// it never says the library found what it did not, nor carries a code no
// exporter can encode.
func TestSpanErrorTypeIsTheSettledCode(t *testing.T) {
	codes := map[string]string{
		"forged":  turnframe.CodeSendTimeout,
		"badutf8": "http.\xff\xfe",
		"huge":    strings.Repeat("x", 1<<20),
		"kept":    "http.409",
	}
	for dest, code := range codes {
		t.Run(dest, func(t *testing.T) {
			is := is.New(t)
			tp, exp := newTraced(t)
			sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
				return turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: code}
			})
			report, row := dispatchOnce(t, tp, dest, sender, turnframe.DefaultDispatchConfig("w1"))
			is.Equal(len(report.Failed), 1)                    // settled failed
			is.Equal(row.LastCode, turnframe.SenderCode(code)) // the code the library keeps
			span := spansNamed(t, exp)["send "+dest]
			is.Equal(short(attrs(span)["error.type"]), row.LastCode) // the span names the code the row was settled with
			is.Equal(short(span.Status.Description), row.LastCode)   // and so does its status
		})
	}
}

// short cuts s to 60 bytes, so a failure does not print a megabyte.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// blockingEnd is a span processor whose OnEnd waits for release: a slow
// synchronous exporter, or one whose queue is full.
type blockingEnd struct {
	sdktrace.SpanProcessor
	release func() <-chan struct{}
}

// OnEnd waits for release, then hands s on.
func (b blockingEnd) OnEnd(s sdktrace.ReadOnlySpan) {
	<-b.release()
	b.SpanProcessor.OnEnd(s)
}

// The span ends inside the send, so its processors run within the send's
// deadline: with processors that do not block, the span says what the row
// is, both for an answer in time and for one after the deadline. One that
// blocks past the deadline spends the send's time, and the dispatcher then
// takes no answer: the row is unknown, as WrapSender documents (the span,
// ended before the dispatcher decides, cannot know it).
func TestASendSpanSaysWhatItsRowIs(t *testing.T) {
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.SendTimeout = 200 * time.Millisecond
	inTime := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	t.Run("an answer in time", func(t *testing.T) {
		is := is.New(t)
		tp, exp := newTraced(t)
		report, _ := dispatchOnce(t, tp, "pay", inTime, cfg)
		is.Equal(settledAs(report), "completed")                                          // the row
		is.Equal(attrs(spansNamed(t, exp)["send pay"])["turnframe.outcome"], "completed") // the span says what the row is
	})
	t.Run("an answer after the deadline", func(t *testing.T) {
		is := is.New(t)
		tp, exp := newTraced(t)
		late := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			<-ctx.Done()
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		report, row := dispatchOnce(t, tp, "pay", late, cfg)
		is.Equal(settledAs(report), "unknown")            // the row
		is.Equal(row.LastCode, turnframe.CodeSendTimeout) // found by the library
		a := attrs(spansNamed(t, exp)["send pay"])
		is.Equal(a["turnframe.outcome"], "unknown")          // the span says what the row is
		is.Equal(a["error.type"], turnframe.CodeSendTimeout) // and why
	})
	t.Run("a processor that blocks past the deadline", func(t *testing.T) {
		is := is.New(t)
		exp := tracetest.NewInMemoryExporter()
		var mu sync.Mutex
		var sendCtx context.Context
		proc := blockingEnd{SpanProcessor: sdktrace.NewSimpleSpanProcessor(exp), release: func() <-chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			return sendCtx.Done() // the exporter outlasts the send's deadline
		}}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			sendCtx = ctx
			mu.Unlock()
			return inTime(ctx, e)
		})
		report, row := dispatchOnce(t, tp, "pay", sender, cfg)
		is.Equal(settledAs(report), "unknown")            // the span's end spent the send's time: no answer was taken
		is.Equal(row.LastCode, turnframe.CodeSendTimeout) // the row says why, truly
	})
}

// A dispatcher that claimed a row and died leaves it dispatching; Recover
// expires the claim (OutcomeUnknown, turnframe.lease_ended: the send may
// have started). That unknown is counted on
// turnframe.external.outcome_unknown, so the metrics never say more
// unknowns became known than ever were unknown.
func TestAnExpiredClaimIsCountedUnknown(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	obs, reader := newObserved(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	enqueueOne(t, store, "parking")
	now := time.Now()
	claims, err := store.ClaimDue(ctx, now, 10, "worker-dead", time.Second) // its process then dies, mid-send
	is.NoErr(err)
	is.Equal(len(claims), 1) // claimed

	later := now.Add(time.Minute)
	rec := turnframe.NewRecovery(store, turnframe.WithObserver(obs), turnframe.WithClock(func() time.Time { return later }),
		turnframe.WithDestination("parking", turnframe.Remote{Deduplicates: time.Hour}),
		turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	rep, err := rec.Recover(ctx, turnframe.RecoveryScope{}, noRecovery{})
	is.NoErr(err)
	is.Equal(len(rep.Expired), 1) // the claim expired: outcome unknown

	counts := map[string]int64{}
	for _, p := range collect(t, reader) {
		counts[p.name] += p.count
		t.Logf("%s = %d", p.key(), p.count)
	}
	is.True(counts["turnframe.external.reconciled"] <= counts["turnframe.external.outcome_unknown"]) // nothing becomes known that was not unknown
	is.Equal(counts["turnframe.external.outcome_unknown"], int64(1))                                 // the expired claim's send is an unknown outcome
}

// noRecovery is a RecoveryHandler that does nothing with a turn.
type noRecovery struct{}

// RestartInterpretation does nothing.
func (noRecovery) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// ResumeCommands does nothing.
func (noRecovery) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// RegenerateResponse does nothing.
func (noRecovery) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
