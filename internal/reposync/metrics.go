package reposync

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the sync engine. Relay labels are bounded by the tracked-relay
// limit; series of forgotten relays are deleted.
type metrics struct {
	relayConnected     *prometheus.GaugeVec
	connectionAttempts *prometheus.CounterVec
	eventsReceived     *prometheus.CounterVec
	relaysTracked      prometheus.Gauge
	relaysConnected    prometheus.Gauge
	filtersOpen        *prometheus.GaugeVec
	pendingBatches     *prometheus.GaugeVec
	repositories       prometheus.Gauge
	rootEvents         prometheus.Gauge
	historicBatches    *prometheus.CounterVec
	truncation         *prometheus.CounterVec
	readAuth           *prometheus.CounterVec
	requests           *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		relayConnected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_relay_connected", Help: "Connection state per relay: 0 disconnected, 1 connecting, 2 syncing, 3 connected, 4 connected with historic sync failures.",
		}, []string{"relay"}),
		connectionAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_connection_attempts_total", Help: "Connection attempts per relay by result (success, failure).",
		}, []string{"relay", "result"}),
		eventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_received_total", Help: "Events received from remote relays (before dedupe), per relay.",
		}, []string{"relay"}),
		relaysTracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_tracked", Help: "Remote relays tracked.",
		}),
		relaysConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_connected", Help: "Remote relays currently connected.",
		}),
		filtersOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_filters_open", Help: "Live filters open per relay.",
		}, []string{"relay"}),
		pendingBatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_pending_batches", Help: "Historic sync batches in flight per relay.",
		}, []string{"relay"}),
		repositories: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_repositories", Help: "Repositories in the repoindex.RepoSyncIndex.",
		}),
		rootEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_root_events", Help: "Root events tracked across repositories.",
		}),
		historicBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_historic_batches_total", Help: "Historic sync batches finished, by result (ok, failed).",
		}, []string{"result"}),
		truncation: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_truncation_detected_total", Help: "Times a relay was caught returning fewer events than it holds, by kind (negentropy: a NIP-77 set cut at a cap; req: a REQ page cut below its limit; tie: a second holding more events than a REQ returns that neither NIP-77 nor a split filter read whole).",
		}, []string{"relay", "kind"}),
		readAuth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_read_auth_total", Help: "NIP-42 authentications asked for by remote relays before they serve reads, by result (authenticated, no_key, failed).",
		}, []string{"relay", "result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_relay_requests_total",
			Help: "REQs and NEG-OPENs sent to a remote relay (live and historic subscriptions, negentropy sessions, fetches by id).",
		}, []string{"relay"}),
	}
	// At 0 from the start, so increase() in deploy/prometheus/alerts.yml sees the first failure.
	m.historicBatches.WithLabelValues("ok")
	m.historicBatches.WithLabelValues("failed")
	for _, c := range []prometheus.Collector{
		m.relayConnected, m.connectionAttempts, m.eventsReceived, m.relaysTracked,
		m.relaysConnected, m.filtersOpen, m.pendingBatches, m.repositories,
		m.rootEvents, m.historicBatches, m.truncation, m.readAuth, m.requests,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// trackRelay creates a newly tracked relay's series at 0, its own and the
// historic trackers' (nil ones do nothing), so a rate sees its first event.
func (m *metrics) trackRelay(url string, trackers ...interface{ Track(string) }) {
	m.connectionAttempts.WithLabelValues(url, "success")
	m.connectionAttempts.WithLabelValues(url, "failure")
	m.eventsReceived.WithLabelValues(url)
	m.filtersOpen.WithLabelValues(url)
	m.pendingBatches.WithLabelValues(url)
	for _, tr := range trackers {
		tr.Track(url)
	}
}

func (m *metrics) forgetRelay(url string) {
	m.relayConnected.DeleteLabelValues(url)
	m.connectionAttempts.DeleteLabelValues(url, "success")
	m.connectionAttempts.DeleteLabelValues(url, "failure")
	m.eventsReceived.DeleteLabelValues(url)
	m.filtersOpen.DeleteLabelValues(url)
	m.pendingBatches.DeleteLabelValues(url)
	m.requests.DeleteLabelValues(url)
}
