package reposync

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the sync engine. Relay labels are bounded by the tracked-relay
// limit; series of forgotten relays are deleted.
type metrics struct {
	relayConnected     *prometheus.GaugeVec
	connectionAttempts *prometheus.CounterVec
	eventsSynced       prometheus.Counter
	eventsRejected     *prometheus.CounterVec
	eventsDuplicate    prometheus.Counter
	eventsInvalid      *prometheus.CounterVec
	eventsReceived     *prometheus.CounterVec
	relaysTracked      prometheus.Gauge
	relaysConnected    prometheus.Gauge
	filtersOpen        *prometheus.GaugeVec
	pendingBatches     *prometheus.GaugeVec
	repositories       prometheus.Gauge
	rootEvents         prometheus.Gauge
	limitHits          *prometheus.CounterVec
	historicBatches    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		relayConnected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_relay_connected",
			Help: "Connection state per relay: 0 disconnected, 1 connecting, 2 syncing, 3 connected, 4 connected with historic sync failures.",
		}, []string{"relay"}),
		connectionAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_connection_attempts_total",
			Help: "Connection attempts per relay by result (success, failure).",
		}, []string{"relay", "result"}),
		eventsSynced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_events_synced_total",
			Help: "Events newly accepted by the own relay.",
		}),
		eventsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_rejected_total",
			Help: "Events the own relay refused, by reason prefix.",
		}, []string{"reason"}),
		eventsDuplicate: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_events_duplicate_total",
			Help: "Events the own relay already had.",
		}),
		eventsInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_invalid_total",
			Help: "Events dropped before publishing, by reason (bad_id, bad_signature, too_large, too_many_tags, no_match).",
		}, []string{"reason"}),
		eventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_received_total",
			Help: "Events received from remote relays (before dedupe), per relay.",
		}, []string{"relay"}),
		relaysTracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_tracked_total",
			Help: "Remote relays tracked (a gauge, named as the contract requires).",
		}),
		relaysConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_relays_connected_total",
			Help: "Remote relays currently connected (a gauge, named as the contract requires).",
		}),
		filtersOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_filters_open",
			Help: "Live filters open per relay.",
		}, []string{"relay"}),
		pendingBatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ngit_sync_pending_batches",
			Help: "Historic sync batches in flight per relay.",
		}, []string{"relay"}),
		repositories: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_repositories",
			Help: "Repositories in the RepoSyncIndex.",
		}),
		rootEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_root_events",
			Help: "Root events tracked across repositories.",
		}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_limit_hits_total",
			Help: "Times a configured bound refused input, by limit.",
		}, []string{"limit"}),
		historicBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_historic_batches_total",
			Help: "Historic sync batches finished, by result (ok, failed).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{
		m.relayConnected, m.connectionAttempts, m.eventsSynced, m.eventsRejected,
		m.eventsDuplicate, m.eventsInvalid, m.eventsReceived, m.relaysTracked,
		m.relaysConnected, m.filtersOpen, m.pendingBatches, m.repositories,
		m.rootEvents, m.limitHits, m.historicBatches,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) forgetRelay(url string) {
	m.relayConnected.DeleteLabelValues(url)
	m.connectionAttempts.DeleteLabelValues(url, "success")
	m.connectionAttempts.DeleteLabelValues(url, "failure")
	m.eventsReceived.DeleteLabelValues(url)
	m.filtersOpen.DeleteLabelValues(url)
	m.pendingBatches.DeleteLabelValues(url)
}

// reasonLabel maps an OK reason to a bounded label: its machine-readable
// prefix when it is one of NIP-01's, otherwise "other".
func reasonLabel(reason string) string {
	prefix, _, found := strings.Cut(reason, ":")
	if !found {
		return "other"
	}
	switch prefix {
	case "blocked", "restricted", "invalid", "pow", "rate-limited", "auth-required", "error", "mute", "duplicate":
		return prefix
	}
	return "other"
}
