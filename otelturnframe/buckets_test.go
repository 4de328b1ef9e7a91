package otelturnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/otelturnframe"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// newProvider returns an SDK meter provider with views, and the manual
// reader that collects from it.
func newProvider(t *testing.T, views ...sdkmetric.View) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(views...))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, reader
}

// countAndSum is the View WithDurationBuckets's doc gives: both duration
// histograms, an explicit-bucket aggregation of no boundaries.
func countAndSum() sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: "messaging.*.duration", Scope: instrumentation.Scope{Name: otelturnframe.ScopeName}},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{}})
}

// observeBoth records one value on each duration histogram.
func observeBoth(obs *otelturnframe.Observer) {
	obs.Observe(turnframe.SignalExternalLatency, turnframe.Labels{Destination: "payments", Outcome: "completed"}, time.Second)
	obs.Observe(turnframe.SignalCommandDuration, turnframe.Labels{Command: "book", Outcome: "commit"}, time.Second)
}

// WithDurationBuckets with no bounds gives the histograms no advice — the
// metric API cannot advise a histogram without buckets — so the provider's
// own boundaries apply; an SDK View of an explicit-bucket aggregation with
// no boundaries is what makes them a count and a sum.
func TestNoDurationBucketsLeaveTheBoundariesToTheProvider(t *testing.T) {
	t.Run("the provider's own boundaries apply", func(t *testing.T) {
		is := is.New(t)
		mp, reader := newProvider(t)
		obs, err := otelturnframe.NewObserver(mp, otelturnframe.WithDurationBuckets())
		is.NoErr(err)
		plain, err := mp.Meter("plain").Float64Histogram("plain") // no advice at all
		is.NoErr(err)
		plain.Record(context.Background(), 1)
		observeBoth(obs)
		own := histogramBounds(t, reader, "plain")
		is.True(len(own) > 0)                                                            // the SDK's defaults are buckets
		is.Equal(histogramBounds(t, reader, "messaging.process.duration"), own)          // a handler call: the provider's own
		is.Equal(histogramBounds(t, reader, "messaging.client.operation.duration"), own) // a send: the provider's own
	})
	for name, opts := range map[string][]otelturnframe.Option{
		"with no bounds":          {otelturnframe.WithDurationBuckets()},
		"over the default advice": nil,
		"over the bounds given":   {otelturnframe.WithDurationBuckets(0.5, 1, 2)},
	} {
		t.Run("a View makes them a count and a sum "+name, func(t *testing.T) {
			is := is.New(t)
			mp, reader := newProvider(t, countAndSum())
			obs, err := otelturnframe.NewObserver(mp, opts...)
			is.NoErr(err)
			observeBoth(obs)
			is.Equal(len(histogramBounds(t, reader, "messaging.process.duration")), 0)          // a count and a sum
			is.Equal(len(histogramBounds(t, reader, "messaging.client.operation.duration")), 0) // a count and a sum
			pts := find(collect(t, reader), "messaging.process.duration")
			is.Equal(len(pts), 1)            // one handler call
			is.Equal(pts[0].count, int64(1)) // counted
			is.Equal(pts[0].sum, 1.0)        // summed, in seconds
		})
	}
}
