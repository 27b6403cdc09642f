package health

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, in the project's scheme (README, "Metrics"): ngit_sync_*,
// gauges without the _total suffix that only counters carry: the counts of
// dead and rate-limited relays are gauges, so they are
// ngit_sync_relays_dead and ngit_sync_relays_rate_limited, not *_total.
const (
	MetricRelayStatus       = "ngit_sync_relay_status"
	MetricRelayFailures     = "ngit_sync_relay_failures"
	MetricRelaysDead        = "ngit_sync_relays_dead"
	MetricRelaysRateLimited = "ngit_sync_relays_rate_limited"
)

type metrics struct {
	status           *prometheus.GaugeVec
	failures         *prometheus.GaugeVec
	deadTotal        prometheus.Gauge
	rateLimitedTotal prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricRelayStatus,
			Help: "Health state per relay: 1 healthy, 2 disconnected, 3 degraded, 4 dead, 5 rate_limited.",
		}, []string{"relay"}),
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricRelayFailures,
			Help: "Consecutive connection failures per relay.",
		}, []string{"relay"}),
		deadTotal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricRelaysDead,
			Help: "Number of relays currently dead.",
		}),
		rateLimitedTotal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricRelaysRateLimited,
			Help: "Number of relays currently in a rate-limit cooldown.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.status, m.failures, m.deadTotal, m.rateLimitedTotal} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register health metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) set(url string, s State, failures int) {
	m.status.WithLabelValues(url).Set(float64(s))
	m.failures.WithLabelValues(url).Set(float64(failures))
}

func (m *metrics) forget(url string) {
	m.status.DeleteLabelValues(url)
	m.failures.DeleteLabelValues(url)
}
