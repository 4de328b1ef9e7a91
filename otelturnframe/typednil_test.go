package otelturnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/otelturnframe"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// panicOf returns what f panics with, as a string ("" for none).
func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
			if msg == "" {
				msg = "a panic that is not a message"
			}
		}
	}()
	f()
	return ""
}

// WrapSender "panics if next or tp is nil". A nil *turnframe.HTTPSender
// (NewHTTPSender's error ignored) is a nil next: wrapped, it passed the
// Dispatcher's own check for a nil sender, which sees the wrapper, and
// every row claimed was settled an unknown outcome (the sender's panic)
// though nothing was sent, for a person to settle by hand.
func TestWrapSenderPanicsOnANilSenderOfAConcreteType(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	enqueueOne(t, store, "payments")
	var sender *turnframe.HTTPSender // NewHTTPSender failed; the error was only logged
	msg := panicOf(func() {
		d := turnframe.NewDispatcher(store, otelturnframe.WrapSender(sender, sdktrace.NewTracerProvider()),
			turnframe.DispatchConfig{WorkerID: "w1"}, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		report, err := d.RunOnce(context.Background(), time.Now())
		if err == nil && len(report.Unknown) == 1 {
			t.Logf("the row never sent was settled unknown: %+v", report.Unknown)
		}
	})
	is.True(strings.Contains(msg, "nil sender")) // a programmer error, found at start-up
}

// A nil provider of a concrete type is a nil provider: WrapSender panics
// saying so, and NewObserver returns the *turnframe.InvalidError its doc
// promises, where both died on a nil pointer inside the SDK.
func TestANilProviderOfAConcreteTypeIsANilProvider(t *testing.T) {
	t.Run("WrapSender", func(t *testing.T) {
		is := is.New(t)
		var tp *sdktrace.TracerProvider
		send := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		msg := panicOf(func() { otelturnframe.WrapSender(send, tp) })
		is.True(strings.Contains(msg, "nil TracerProvider")) // said, not a nil dereference
	})
	t.Run("NewObserver", func(t *testing.T) {
		is := is.New(t)
		var mp *sdkmetric.MeterProvider
		var obs *otelturnframe.Observer
		var err error
		msg := panicOf(func() { obs, err = otelturnframe.NewObserver(mp) })
		is.Equal(msg, "")                             // no panic
		is.True(errors.Is(err, turnframe.ErrInvalid)) // the refusal its doc promises
		is.True(obs == nil)
	})
}
