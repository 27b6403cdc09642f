package reposync

import (
	"slices"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// applyDelta makes sure every relay a batch added items for is tracked,
// runs compute_actions over those items and connects what is due. Relays
// that are not up get their whole target on connect (recomputeRelay).
func (e *Engine) applyDelta(delta map[string]repoindex.Items) {
	urls := make([]string, 0, len(delta))
	for url := range delta {
		urls = append(urls, url)
	}
	slices.Sort(urls)
	for _, url := range urls {
		if e.relays[url] == nil {
			if e.cfg.MaxTrackedRelays > 0 && len(e.relays) >= e.cfg.MaxTrackedRelays {
				e.h.LimitHit("tracked_relays")
				delete(delta, url)
				continue
			}
			e.track(url, false)
		}
	}
	e.runActions(delta)
	e.connectDue()
	e.updateIndexMetrics()
}

// bootstrap23 lists the bootstrap relays asked about every repository
// (layers 2 and 3): none unless BootstrapAllLayers is set.
func (e *Engine) bootstrap23() []string {
	if !e.cfg.BootstrapAllLayers {
		return nil
	}
	return e.bootstrapList()
}

func (e *Engine) bootstrapList() []string {
	out := make([]string, 0, len(e.bootstrapOK))
	for url := range e.bootstrapOK {
		out = append(out, url)
	}
	slices.Sort(out)
	return out
}

func (e *Engine) track(url string, bootstrap bool) {
	if e.relays[url] != nil {
		return
	}
	r := &remote{RelayState: repoindex.RelayState{URL: url, Bootstrap: bootstrap, Confirmed: repoindex.NewItems()}}
	e.applyRestored(r)
	e.relays[url] = r
	e.d.Health.Track(url)
	e.m.RelayConnected.WithLabelValues(url).Set(float64(repoindex.Disconnected))
	e.m.TrackRelay(url, e.pager.Truncation, e.pager.Auth, e.neg, e.d.Pacer)
}

// runActions is the decision point: compute_actions over all relays and
// AddFilters for each result.
func (e *Engine) runActions(targets map[string]repoindex.Target) {
	rs := make(map[string]*repoindex.RelayState, len(e.relays))
	for url, r := range e.relays {
		rs[url] = &r.RelayState
	}
	for _, a := range repoindex.ComputeActions(targets, e.pending, rs) {
		e.subs.addFilters(a)
	}
}

// recomputeRelay runs compute_actions for one relay (relayActions: the
// diff without the relay's target).
func (e *Engine) recomputeRelay(url string) {
	r := e.relays[url]
	if r == nil || !r.Status.IsUp() {
		return
	}
	if !e.subs.allowed(r) || !r.consolidateBy.IsZero() {
		// addFilters would defer whatever the diff holds: a relay waiting
		// for its consolidation is recomputed once it ran, not at every
		// batch that ends meanwhile.
		r.deferred = true
		return
	}
	add := repoindex.RelayActions(e.disc.Repos, url, e.bootstrapOK[url] && e.cfg.BootstrapAllLayers, e.pending[url], &r.RelayState)
	if !add.Empty() {
		e.subs.addFilters(repoindex.AddFilters{Relay: url, Items: add})
	}
}
