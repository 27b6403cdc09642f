package statestore

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	bytes       prometheus.Gauge
	perEvent    prometheus.Gauge
	flushes     *prometheus.CounterVec
	flushSecs   prometheus.Counter
	flushBytes  prometheus.Counter
	compactions prometheus.Counter
	relaysSaved prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_state_bytes", Help: "Size of the state store file on disk.",
		}),
		perEvent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_state_bytes_per_event", Help: "State store file size divided by the events in the local index.",
		}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_state_flushes_total", Help: "State store write transactions, by result.",
		}, []string{"result"}),
		flushSecs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_state_flush_seconds_total", Help: "Time spent in state store write transactions.",
		}),
		flushBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_state_written_bytes_total", Help: "Bytes of values written to the state store.",
		}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_state_compactions_total", Help: "Rewrites of the persisted local index as one snapshot.",
		}),
		relaysSaved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_state_relays_saved_timestamp_seconds",
			Help: "When the remote relays' states were last saved (Unix seconds; 0 until the first save of this run).",
		}),
	}
	// Both results exist at 0 from the start, so the state-write alert
	// (deploy/prometheus/alerts.yml) sees the first error.
	for _, r := range []string{"ok", "error"} {
		m.flushes.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bytes, m.perEvent, m.flushes, m.flushSecs, m.flushBytes, m.compactions, m.relaysSaved} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("statestore: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
