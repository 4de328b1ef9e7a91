package otelturnframe

import (
	"context"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"go.opentelemetry.io/otel/metric"
)

// maxCached bounds how many (signal, labels) pairs an Observer keeps the
// attribute sets of. Labels carry no ids, so an application meets far
// fewer; past the bound, Observe builds the sets on each call instead of
// growing without end.
const maxCached = 4096

// Observer is a turnframe.Observer recording each signal on OpenTelemetry
// instruments, as the package doc's table says. Its instruments are created
// once, by NewObserver. Observe is safe for concurrent use and, for labels
// it has seen before, allocates nothing of its own (the SDK behind the
// meter may). It starts no goroutine and holds nothing to close: the
// MeterProvider's reader or exporter decides when the numbers leave.
type Observer struct {
	in instruments

	mu   sync.RWMutex
	seen map[observed][]step
}

var _ turnframe.Observer = (*Observer)(nil)

// observed is one signal with one set of labels.
type observed struct {
	s turnframe.Signal
	l turnframe.Labels
}

// NewObserver returns an Observer recording on a meter of meterProvider
// named ScopeName. It returns a *turnframe.InvalidError (errors.Is
// turnframe.ErrInvalid) when meterProvider is nil (or holds a nil pointer,
// like a nil *sdkmetric.MeterProvider) or an option is invalid,
// and the meter's error, wrapped, when it refuses an instrument.
func NewObserver(meterProvider metric.MeterProvider, opts ...Option) (*Observer, error) {
	if isNil(meterProvider) {
		return nil, &turnframe.InvalidError{Field: "meterProvider", Reason: "nil"}
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	in, err := newInstruments(meterOf(meterProvider), c)
	if err != nil {
		return nil, err
	}
	return &Observer{in: in, seen: make(map[observed][]step)}, nil
}

// Observe records one occurrence of s with l: it adds one to a counter, or
// records d in seconds on a histogram for a timed signal, on each
// instrument the package doc's table names for s. A signal the table does
// not name records nothing.
func (o *Observer) Observe(s turnframe.Signal, l turnframe.Labels, d time.Duration) {
	ctx := context.Background()
	for _, st := range o.steps(observed{s, l}) {
		if st.hist != nil {
			st.hist.Record(ctx, d.Seconds(), st.rec...)
			continue
		}
		st.counter.Add(ctx, 1, st.add...)
	}
}

// steps returns what observing k records, from the cache when it was seen
// before.
func (o *Observer) steps(k observed) []step {
	o.mu.RLock()
	steps, ok := o.seen[k]
	o.mu.RUnlock()
	if ok {
		return steps
	}
	steps = o.in.route(k.s, k.l)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) < maxCached {
		o.seen[k] = steps
	}
	return steps
}
