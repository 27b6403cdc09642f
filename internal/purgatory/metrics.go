package purgatory

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric label values for kinds and results (bounded sets).
const (
	kindState    = "30618"
	kindPR       = "1618"
	kindPRUpdate = "1619"

	resultComplete = "complete"
	resultRetry    = "retry"
	resultOK       = "ok"
	resultError    = "error"

	otherDomain = "other"
)

type metrics struct {
	events         *prometheus.GaugeVec
	queueSize      prometheus.Gauge
	attempts       *prometheus.CounterVec
	oidsFetched    prometheus.Counter
	released       *prometheus.CounterVec
	expired        *prometheus.CounterVec
	refused        *prometheus.CounterVec
	domainInFlight *prometheus.GaugeVec
	domainWaiting  *prometheus.GaugeVec
	domainRequests *prometheus.CounterVec

	mu        sync.Mutex
	maxLabels int
	labels    map[string]string
}

func newMetrics(reg prometheus.Registerer, maxLabels int) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_purgatory_events", Help: "Events held in purgatory waiting for git data, by kind.",
		}, []string{"kind"}),
		queueSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_purgatory_sync_queue_size", Help: "Identifiers in the purgatory sync queue.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_sync_attempts_total", Help: "Sync attempts per identifier by result (complete, retry).",
		}, []string{"result"}),
		oidsFetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_oids_fetched_total", Help: "Git object ids fetched from remote clone URLs.",
		}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_events_released_total", Help: "Events released from purgatory, by kind.",
		}, []string{"kind"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_events_expired_total", Help: "Events dropped after the expiry without git data, by kind.",
		}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_events_refused_total", Help: "Events not taken into purgatory because it was full (max_entries), by kind.",
		}, []string{"kind"}),
		domainInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_purgatory_domain_in_flight", Help: "Git requests in flight per clone URL domain.",
		}, []string{"domain"}),
		domainWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_purgatory_domain_waiting", Help: "Identifiers waiting for a git request slot per clone URL domain (throttled, not failed).",
		}, []string{"domain"}),
		domainRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_purgatory_domain_requests_total", Help: "Git fetch rounds per clone URL domain by result (ok, error).",
		}, []string{"domain", "result"}),
		maxLabels: maxLabels,
		labels:    map[string]string{},
	}
	// Every kind and result exists at 0 from the start, so rates and
	// increases over them (deploy/prometheus/alerts.yml) see the first one.
	for _, k := range []string{kindState, kindPR, kindPRUpdate} {
		m.events.WithLabelValues(k)
		m.released.WithLabelValues(k)
		m.expired.WithLabelValues(k)
		m.refused.WithLabelValues(k)
	}
	for _, r := range []string{resultComplete, resultRetry} {
		m.attempts.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.events, m.queueSize, m.attempts, m.oidsFetched, m.released,
			m.expired, m.refused, m.domainInFlight, m.domainWaiting, m.domainRequests} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// domain maps a domain to its label value: the first maxLabels distinct
// domains keep their name, later ones are folded into "other". A label
// value's series start at 0 when it is first seen (a hosted announcement
// names the domain, or a request goes there).
func (m *metrics) domain(d string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.labels[d]; ok {
		return l
	}
	l := otherDomain
	if len(m.labels) < m.maxLabels {
		l = d
	}
	m.domainInFlight.WithLabelValues(l)
	m.domainWaiting.WithLabelValues(l)
	m.domainRequests.WithLabelValues(l, resultOK)
	m.domainRequests.WithLabelValues(l, resultError)
	m.labels[d] = l
	if len(m.labels) > 4*m.maxLabels { // bound the memo itself
		for k, v := range m.labels {
			if v == otherDomain {
				delete(m.labels, k)
			}
		}
	}
	return l
}

func kindLabel(kind int) string {
	switch kind {
	case 30618:
		return kindState
	case 1618:
		return kindPR
	default:
		return kindPRUpdate
	}
}
