package main_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/matryer/is"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	prom "github.com/turnframe/turnframe/otelturnframe/example/prometheus"
)

// scrape runs the example's workload and returns what its /metrics
// handler serves, by family name.
func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	is := is.New(t)
	is.Helper()
	m, err := prom.NewMetrics()
	is.NoErr(err)                                             // metrics
	is.NoErr(prom.Workload(context.Background(), m.Observer)) // workload
	srv := httptest.NewServer(m.Handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	is.NoErr(err) // scrape
	defer resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // served
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	is.NoErr(err) // Prometheus text format
	return families
}

// labels returns a series' labels as a map.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestTheMetricsAreScrapedUnderTheExportersNames(t *testing.T) {
	families := scrape(t)

	t.Run("sent messages, a counter by outcome", func(t *testing.T) {
		is := is.New(t)
		f := families["messaging_client_sent_messages_total"]
		is.True(f != nil)                             // the exporter's name for messaging.client.sent.messages
		is.Equal(f.GetType(), dto.MetricType_COUNTER) // a counter
		outcomes := map[string]float64{}
		for _, m := range f.GetMetric() {
			l := labels(m)
			is.Equal(l["messaging_system"], "turnframe") // the system
			outcomes[l["messaging_destination_name"]+" "+l["turnframe_outcome"]+" "+l["error_type"]] = m.GetCounter().GetValue()
		}
		is.Equal(outcomes, map[string]float64{"payments completed ": 1, "email retried smtp.421": 1}) // one per settled send
	})

	t.Run("durations, histograms in seconds", func(t *testing.T) {
		is := is.New(t)
		for _, name := range []string{"messaging_client_operation_duration_seconds", "messaging_process_duration_seconds"} {
			f := families[name]
			is.True(f != nil)                               // the exporter's name, with the unit
			is.Equal(f.GetType(), dto.MetricType_HISTOGRAM) // a histogram
			var count uint64
			for _, m := range f.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
			}
			is.Equal(count, uint64(2)) // two sends, two handler calls
		}
	})

	t.Run("turnframe's own counters", func(t *testing.T) {
		is := is.New(t)
		for name, want := range map[string]float64{
			"turnframe_outbox_claimed_total":    2,
			"turnframe_command_committed_total": 1,
			"turnframe_command_rejected_total":  1,
		} {
			f := families[name]
			is.True(f != nil) // the exporter's name
			var sum float64
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			is.Equal(sum, want) // counted
		}
	})
}
