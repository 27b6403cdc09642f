package ingest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// metrics of the handler: what became of the events it took in.
type metrics struct {
	eventsSynced    prometheus.Counter
	eventsRejected  *prometheus.CounterVec
	eventsDuplicate prometheus.Counter
	// eventsSeenAgain: copies of events the handler had seen, dropped
	// before any check (a remote's repeats, catch-ups read again, the
	// same event from several relays).
	eventsSeenAgain prometheus.Counter
	eventsInvalid   *prometheus.CounterVec
	limitHits       *prometheus.CounterVec
	// ownHeld and ownHeldRepublished: events the own relay accepted into
	// its GRASP purgatory without serving them.
	ownHeld            prometheus.Gauge
	ownHeldRepublished prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		eventsSeenAgain: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_events_seen_again_total",
			Help: "Events received from remote relays that the sidecar had seen already (from that relay or another, or on the own relay), dropped before any check.",
		}),
		eventsInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_events_invalid_total",
			Help: "Events dropped as invalid, by reason (bad_id, bad_signature, too_large, too_many_tags, no_match; closed_subscription: sent by a remote relay for a subscription not open; malformed: an event object that does not decode; refused_invalid: the own relay answered invalid: for an event whose signature verifies).",
		}, []string{"reason"}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_limit_hits_total",
			Help: "Times a configured bound refused input, by limit.",
		}, []string{"limit"}),
		ownHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_own_purgatory_events",
			Help: "Events the own relay accepted into its GRASP purgatory (OK true \"purgatory:\") and does not serve yet.",
		}),
		ownHeldRepublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_own_purgatory_republished_total",
			Help: "Events published again because the own relay had not served them within publisher.own_purgatory_recheck.",
		}),
	}
	// Every known reason and limit exists at 0 from the start, so rates over
	// them (deploy/grafana/grasp-sync.json) see the first one.
	for _, r := range rejectedReasons {
		m.eventsRejected.WithLabelValues(r)
	}
	for _, r := range invalidReasons {
		m.eventsInvalid.WithLabelValues(r)
	}
	for _, l := range limitNames {
		m.limitHits.WithLabelValues(l)
	}
	for _, c := range []prometheus.Collector{m.eventsSynced, m.eventsRejected, m.eventsDuplicate, m.eventsSeenAgain, m.eventsInvalid, m.limitHits, m.ownHeld, m.ownHeldRepublished} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// rejectedReasons are the label values reasonLabel gives a refusal: NIP-01's
// prefixes except duplicate (counted as a duplicate) and purgatory (held,
// not refused), and "other".
var rejectedReasons = []string{
	relay.ReasonPoW, relay.ReasonBlocked, relay.ReasonRateLimited, relay.ReasonInvalid,
	relay.ReasonRestricted, relay.ReasonMute, relay.ReasonError, relay.ReasonAuthRequired, "other",
}

// invalidReasons are the label values of ngit_sync_events_invalid_total
// (its help lists them).
var invalidReasons = []string{
	"bad_id", "bad_signature", "too_large", "too_many_tags", "no_match",
	relay.DropClosedSubscription, relay.DropMalformed, "refused_invalid",
}

// limitNames are the label values of ngit_sync_limit_hits_total: the
// handler's own and those LimitHit is called with (internal/discovery,
// internal/reposync).
var limitNames = []string{
	"relay_event_rate", "relay_queue", "own_purgatory",
	"relays_per_announcement", "repositories", "orphan_roots", "tracked_relays",
}

// reasonLabel maps an OK reason to a bounded label: its machine-readable
// prefix when it is one of NIP-01's, otherwise "other".
func reasonLabel(reason string) string {
	if prefix := relay.ReasonPrefix(reason); prefix != "" {
		return prefix
	}
	return "other"
}
