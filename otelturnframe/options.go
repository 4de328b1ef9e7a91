package otelturnframe

import (
	"fmt"
	"math"

	"github.com/turnframe/turnframe"
)

// DefaultDurationBuckets are the explicit bucket boundaries, in seconds, of
// the two duration histograms unless WithDurationBuckets says otherwise:
// the ones the messaging semantic conventions advise for
// messaging.client.operation.duration and messaging.process.duration.
func DefaultDurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
}

// Option configures NewObserver.
type Option func(*config)

type config struct {
	buckets []float64
}

func newConfig(opts []Option) (config, error) {
	c := config{buckets: DefaultDurationBuckets()}
	for _, opt := range opts {
		opt(&c)
	}
	if err := checkBuckets(c.buckets); err != nil {
		return config{}, err
	}
	return c, nil
}

// WithDurationBuckets sets the bucket boundaries, in seconds, of both
// duration histograms. They must be finite and strictly increasing, or
// NewObserver returns a *turnframe.InvalidError. They are the instruments'
// advice (metric.WithExplicitBucketBoundaries), which an SDK View
// overrides.
//
// None at all gives no advice: the metric API cannot advise a histogram
// without buckets, so the MeterProvider's own boundaries apply (the Go
// SDK's defaults, 0 to 10000, made for milliseconds). To make the
// histograms a count and a sum, give the MeterProvider a View of an
// explicit-bucket aggregation with no boundaries:
//
//	sdkmetric.WithView(sdkmetric.NewView(
//		sdkmetric.Instrument{Name: "messaging.*.duration", Scope: instrumentation.Scope{Name: otelturnframe.ScopeName}},
//		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{}}))
func WithDurationBuckets(bounds ...float64) Option {
	return func(c *config) { c.buckets = append([]float64{}, bounds...) }
}

func checkBuckets(bounds []float64) error {
	for i, b := range bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return &turnframe.InvalidError{Field: fmt.Sprintf("buckets[%d]", i), Reason: "not a finite number"}
		}
		if i > 0 && b <= bounds[i-1] {
			return &turnframe.InvalidError{Field: fmt.Sprintf("buckets[%d]", i), Reason: fmt.Sprintf("%v does not exceed %v", b, bounds[i-1])}
		}
	}
	return nil
}
