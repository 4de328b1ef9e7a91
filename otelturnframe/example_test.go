package otelturnframe_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/otelturnframe"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Install the Observer on a Runtime and a Dispatcher, run one turn whose
// command enqueues a message, send it, and read what was recorded.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	obs, err := otelturnframe.NewObserver(mp)
	check(err)

	store := memstore.New()
	defer store.Close()
	rt := turnframe.New(store, turnframe.WithObserver(obs))
	turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book it")
	check(err)
	_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k-1", Case: "flight/7", Name: "book"}}})
	check(err)
	_, err = rt.Execute(ctx, "acme", turn, turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "booked"}},
			turnframe.OutboxMessage{Destination: "payments"})
	}))
	check(err)
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("worker-1"), turnframe.WithObserver(obs))
	_, err = d.RunOnce(ctx, time.Now())
	check(err)

	var rm metricdata.ResourceMetrics
	check(reader.Collect(ctx, &rm))
	metrics := rm.ScopeMetrics[0].Metrics
	slices.SortFunc(metrics, func(a, b metricdata.Metrics) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range metrics {
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			fmt.Printf("%s %s: %d\n", m.Name, m.Unit, data.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Printf("%s %s: %d recorded\n", m.Name, m.Unit, data.DataPoints[0].Count)
		}
	}
	// Output:
	// messaging.client.operation.duration s: 1 recorded
	// messaging.client.sent.messages {message}: 1
	// messaging.process.duration s: 1 recorded
	// turnframe.command.committed {command}: 1
	// turnframe.outbox.claimed {row}: 1
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
