package otelturnframe_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/turnframe/turnframe/otelturnframe"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// point is one collected data point, flattened for assertions.
type point struct {
	name, unit string
	attrs      map[string]string
	count      int64   // a counter's value, or a histogram's count
	sum        float64 // a histogram's sum
	histogram  bool
}

// newObserved returns an Observer over a fresh SDK meter provider and the
// manual reader that collects from it.
func newObserved(t testing.TB, opts ...otelturnframe.Option) (*otelturnframe.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := otelturnframe.NewObserver(mp, opts...)
	if err != nil {
		t.Fatalf("new observer: %v", err)
	}
	return obs, reader
}

// collect returns every data point the reader holds, sorted by name and
// attributes.
func collect(t testing.TB, reader *sdkmetric.ManualReader) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelturnframe.ScopeName {
			t.Fatalf("scope %q, want %q", sm.Scope.Name, otelturnframe.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !data.IsMonotonic {
					t.Fatalf("%s: not monotonic", m.Name)
				}
				for _, dp := range data.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, attrs: attrMap(dp.Attributes.ToSlice()), count: dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, attrs: attrMap(dp.Attributes.ToSlice()),
						count: int64(dp.Count), sum: dp.Sum, histogram: true})
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// key names a point by its metric and attributes, e.g.
// "turnframe.outbox.claimed{messaging.destination.name=payments}".
func (p point) key() string {
	keys := make([]string, 0, len(p.attrs))
	for k := range p.attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, p.attrs[k])
	}
	return p.name + "{" + b.String() + "}"
}

// find returns the points of the metric name.
func find(points []point, name string) []point {
	var out []point
	for _, p := range points {
		if p.name == name {
			out = append(out, p)
		}
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// histogramBounds returns the bucket bounds of the first data point of the
// histogram name.
func histogramBounds(t testing.TB, reader *sdkmetric.ManualReader, name string) []float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name && len(h.DataPoints) > 0 {
				return h.DataPoints[0].Bounds
			}
		}
	}
	t.Fatalf("no histogram %s", name)
	return nil
}
