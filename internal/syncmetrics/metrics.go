// Package syncmetrics holds the sync engine's Prometheus metrics: per
// remote relay connection state, events received, Requests, live filters
// and pending batches, and the index's totals.
package syncmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the sync engine. Relay labels are bounded by the tracked-relay
// limit; series of forgotten relays are deleted (ForgetRelay).
type Metrics struct {
	RelayConnected     *prometheus.GaugeVec
	ConnectionAttempts *prometheus.CounterVec
	EventsReceived     *prometheus.CounterVec
	RelaysTracked      prometheus.Gauge
	RelaysConnected    prometheus.Gauge
	FiltersOpen        *prometheus.GaugeVec
	PendingBatches     *prometheus.GaugeVec
	Repositories       prometheus.Gauge
	RootEvents         prometheus.Gauge
	HistoricBatches    *prometheus.CounterVec
	Truncation         *prometheus.CounterVec
	ReadAuth           *prometheus.CounterVec
	Requests           *prometheus.CounterVec
}

// New registers the metrics with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		RelayConnected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_relay_connected", Help: "Connection state per relay: 0 disconnected, 1 connecting, 2 syncing, 3 connected, 4 connected with historic sync failures.",
		}, []string{"relay"}),
		ConnectionAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_connection_attempts_total", Help: "Connection attempts per relay by result (success, failure).",
		}, []string{"relay", "result"}),
		EventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_received_total", Help: "Events received from remote relays (before dedupe), per relay.",
		}, []string{"relay"}),
		RelaysTracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_tracked", Help: "Remote relays tracked.",
		}),
		RelaysConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_connected", Help: "Remote relays currently connected.",
		}),
		FiltersOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_filters_open", Help: "Live filters open per relay.",
		}, []string{"relay"}),
		PendingBatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_pending_batches", Help: "Historic sync batches in flight per relay.",
		}, []string{"relay"}),
		Repositories: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_repositories", Help: "Repositories in the repoindex.RepoSyncIndex.",
		}),
		RootEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_root_events", Help: "Root events tracked across Repositories.",
		}),
		HistoricBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_historic_batches_total", Help: "Historic sync batches finished, by result (ok, failed).",
		}, []string{"result"}),
		Truncation: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_truncation_detected_total", Help: "Times a relay was caught returning fewer events than it holds, by kind (negentropy: a NIP-77 set cut at a cap; req: a REQ page cut below its limit; tie: a second holding more events than a REQ returns that neither NIP-77 nor a split filter read whole).",
		}, []string{"relay", "kind"}),
		ReadAuth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_read_auth_total", Help: "NIP-42 authentications asked for by remote relays before they serve reads, by result (authenticated, no_key, failed).",
		}, []string{"relay", "result"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_relay_requests_total",
			Help: "REQs and NEG-OPENs sent to a remote relay (live and historic subscriptions, negentropy sessions, fetches by id).",
		}, []string{"relay"}),
	}
	// At 0 from the start, so increase() in deploy/prometheus/alerts.yml sees the first failure.
	m.HistoricBatches.WithLabelValues("ok")
	m.HistoricBatches.WithLabelValues("failed")
	for _, c := range []prometheus.Collector{
		m.RelayConnected, m.ConnectionAttempts, m.EventsReceived, m.RelaysTracked,
		m.RelaysConnected, m.FiltersOpen, m.PendingBatches, m.Repositories,
		m.RootEvents, m.HistoricBatches, m.Truncation, m.ReadAuth, m.Requests,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// TrackRelay creates a newly tracked relay's series at 0, its own and the
// historic trackers' (nil ones do nothing), so a rate sees its first event.
func (m *Metrics) TrackRelay(url string, trackers ...interface{ Track(string) }) {
	m.ConnectionAttempts.WithLabelValues(url, "success")
	m.ConnectionAttempts.WithLabelValues(url, "failure")
	m.EventsReceived.WithLabelValues(url)
	m.FiltersOpen.WithLabelValues(url)
	m.PendingBatches.WithLabelValues(url)
	for _, tr := range trackers {
		tr.Track(url)
	}
}

// ForgetRelay deletes a relay's series.
func (m *Metrics) ForgetRelay(url string) {
	m.RelayConnected.DeleteLabelValues(url)
	m.ConnectionAttempts.DeleteLabelValues(url, "success")
	m.ConnectionAttempts.DeleteLabelValues(url, "failure")
	m.EventsReceived.DeleteLabelValues(url)
	m.FiltersOpen.DeleteLabelValues(url)
	m.PendingBatches.DeleteLabelValues(url)
	m.Requests.DeleteLabelValues(url)
}
