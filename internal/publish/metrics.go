package publish

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	MetricQueueLength = "ngit_sync_publisher_queue_length"
	MetricInFlight    = "ngit_sync_publisher_in_flight"
	MetricResults     = "ngit_sync_publisher_results_total"
	MetricRetries     = "ngit_sync_publisher_retries_total"
	MetricConnected   = "ngit_sync_publisher_connected"
	MetricWindow      = "ngit_sync_publisher_window"
)

// Retry reasons, the label values of ngit_sync_publisher_retries_total.
const (
	reasonRateLimited = "rate_limited"
	reasonAuth        = "auth"
	reasonTimeout     = "timeout"
	reasonDisconnect  = "disconnect"
)

type metrics struct {
	queue, inFlight, connected prometheus.Gauge
	window                     prometheus.Gauge
	results                    map[Outcome]prometheus.Counter
	retries                    map[string]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricQueueLength,
			Help: "Events waiting to be sent to the own relay (including ones to resend).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricInFlight,
			Help: "EVENTs sent to the own relay and awaiting their OK.",
		}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricConnected,
			Help: "1 while the publisher is connected to the own relay.",
		}),
		window: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricWindow,
			Help: "The publisher's effective window of outstanding EVENTs (below the configured one after rate limiting).",
		}),
		results: make(map[Outcome]prometheus.Counter),
		retries: make(map[string]prometheus.Counter),
	}
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricResults,
		Help: "Events published to the own relay, by the relay's answer.",
	}, []string{"result"})
	retries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRetries,
		Help: "EVENTs queued to be sent again, by reason.",
	}, []string{"reason"})
	for _, o := range []Outcome{Accepted, Duplicate, Rejected, Held} {
		m.results[o] = results.WithLabelValues(o.String())
	}
	for _, r := range []string{reasonRateLimited, reasonAuth, reasonTimeout, reasonDisconnect} {
		m.retries[r] = retries.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.queue, m.inFlight, m.connected, m.window, results, retries} {
			if err := reg.Register(c); err != nil {
				return nil, errors.Join(ErrMetrics, err)
			}
		}
	}
	return m, nil
}
