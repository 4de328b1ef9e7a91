package main

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/turnframe/turnframe/otelturnframe"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metrics are an Observer and the HTTP handler serving what it records in
// Prometheus's text format.
type Metrics struct {
	Observer *otelturnframe.Observer
	Handler  http.Handler
}

// NewMetrics returns an Observer on a meter provider whose reader is the
// OpenTelemetry Prometheus exporter, registered on a registry of its own
// (never Prometheus's default one), and the handler serving that registry.
// It returns the exporter's or the Observer's error, wrapped.
func NewMetrics() (Metrics, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return Metrics{}, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	obs, err := otelturnframe.NewObserver(mp)
	if err != nil {
		return Metrics{}, fmt.Errorf("observer: %w", err)
	}
	return Metrics{Observer: obs, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}
