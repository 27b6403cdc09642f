package reposync

import (
	"slices"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// applySelfBatch updates the RepoSyncIndex from events seen on the own
// relay and starts whatever sync they call for.
func (e *Engine) applySelfBatch(evs []*nostr.Event) {
	isOwn := e.isOwn
	if allow := e.d.AllowRelay; allow != nil {
		// Refused URLs are left out before the per-announcement limit.
		isOwn = func(norm string) bool { return e.isOwn(norm) || allow(norm) != nil }
	}
	// Announcements first, so roots in the same batch find their repos.
	slices.SortStableFunc(evs, func(a, b *nostr.Event) int { return historic.PublishRank(a.Kind) - historic.PublishRank(b.Kind) })
	// delta collects, per relay, only what this batch adds to its target:
	// everything older was decided by earlier batches, so compute_actions
	// needs to look at the new items only (the cost of a batch is its own
	// size, not the size of the whole index).
	delta := map[string]repoindex.Items{}
	add := func(url string) repoindex.Items {
		it, ok := delta[url]
		if !ok {
			it = repoindex.NewItems()
			delta[url] = it
		}
		return it
	}
	boot := e.bootstrap23()
	for _, ev := range evs {
		e.noteHead(ev)
		switch ev.Kind {
		case nip34.KindRepoAnnouncement:
			if !e.hosts(ev) {
				continue
			}
			a, err := repoindex.ParseAnnouncement(ev, isOwn, e.cfg.MaxRelaysPerAnnouncement)
			if err != nil {
				continue
			}
			if a.Dropped > 0 && len(a.Relays) >= e.cfg.MaxRelaysPerAnnouncement {
				e.h.LimitHit("relays_per_announcement")
			}
			needs := e.repos[a.Ref]
			if needs == nil {
				if e.cfg.MaxRepositories > 0 && len(e.repos) >= e.cfg.MaxRepositories {
					e.h.LimitHit("repositories")
					continue
				}
				needs = &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
				e.repos[a.Ref] = needs
				if o := e.orphans[a.Ref]; o != nil {
					needs.Roots.AddAll(o)
					e.orphanCount -= o.Len()
					delete(e.orphans, a.Ref)
				}
				for _, url := range boot {
					add(url).Repos.Add(a.Ref)
					add(url).Roots.AddAll(needs.Roots)
				}
			}
			if a.CreatedAt >= needs.AnnouncedAt {
				needs.AnnouncedAt = a.CreatedAt
				relays := repoindex.SetOf(a.Relays...)
				for url := range relays.All() {
					if !needs.Relays.Has(url) {
						it := add(url)
						it.Repos.Add(a.Ref)
						it.Roots.AddAll(needs.Roots)
					}
				}
				needs.Relays = relays
			}
		default:
			refs, ok := nip34.RootRefs(ev)
			if !ok {
				continue
			}
			for _, ref := range refs {
				needs := e.repos[ref]
				if needs == nil {
					e.addOrphan(ref, ev.ID)
					continue
				}
				if needs.Roots.Has(ev.ID) {
					continue
				}
				needs.Roots.Add(ev.ID)
				for url := range needs.Relays.All() {
					add(url).Roots.Add(ev.ID)
				}
				for _, url := range boot {
					add(url).Roots.Add(ev.ID)
				}
			}
		}
	}
	e.reposGen++
	e.log.Debug("self batch applied", zap.Int("events", len(evs)), zap.Int("relays", len(delta)))
	e.applyDelta(delta)
}

// maxOrphanRoots bounds the root events kept while their announcement is
// not known yet (each costs a reference of at most maxRefLen bytes and an
// id).
const (
	maxOrphanRoots = 200_000
	maxRefLen      = 6 + 64 + 1 + 256
)

// addOrphan keeps a root whose repository is not known yet, up to
// maxOrphanRoots in all, when ref is a well-formed repository reference.
// Orphans whose announcement is not on the own relay are dropped once its
// history has been read (dropOrphans).
func (e *Engine) addOrphan(ref, id string) {
	o := e.orphans[ref]
	if o.Has(id) {
		return
	}
	if !validRepoRef(ref) {
		return
	}
	if e.orphanCount >= maxOrphanRoots {
		e.h.LimitHit("orphan_roots")
		return
	}
	if o == nil {
		o = repoindex.NewSet()
		e.orphans[ref] = o
	}
	o.Add(id)
	e.orphanCount++
}

// dropOrphans forgets the roots whose announcement did not come: called
// once the own relay's history has been read, when any announcement it
// holds has been applied.
func (e *Engine) dropOrphans() {
	if e.orphanCount > 0 {
		e.log.Info("root events without an announcement on the own relay ignored",
			zap.Int("roots", e.orphanCount), zap.Int("repositories", len(e.orphans)))
	}
	clear(e.orphans)
	e.orphanCount = 0
	e.reposGen++
	e.dropUnhostedUnapplied()
}

// validRepoRef reports whether ref is 30617:<64 hex pubkey>:<d> with a
// non-empty d of bounded length.
func validRepoRef(ref string) bool {
	const prefix = "30617:"
	if len(ref) > maxRefLen || !strings.HasPrefix(ref, prefix) {
		return false
	}
	rest := ref[len(prefix):]
	if len(rest) < 66 || rest[64] != ':' {
		return false
	}
	for i := 0; i < 64; i++ {
		if c := rest[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isOwn tells whether a normalized relay URL is the own relay or on the
// service domain.
func (e *Engine) isOwn(norm string) bool {
	if own, err := relay.NormalizeURL(e.cfg.OwnRelay); err == nil && own == norm {
		return true
	}
	if e.cfg.ServiceDomain != "" {
		host := repoindex.RelayHost(norm)
		if host == e.cfg.ServiceDomain || repoindex.HostOnly(host) == e.cfg.ServiceDomain {
			return true
		}
	}
	return false
}

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

// hosts applies GRASP-01 to an announcement the own relay holds: it is
// hosted when it lists the service domain in `clone` and `relays`. Without
// a service domain, or with HostAll, the own relay's acceptance decides.
func (e *Engine) hosts(ann *nostr.Event) bool {
	return nip34.Hosted(ann, e.cfg.ServiceDomain, e.cfg.HostAll)
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
	r := &remote{RelayState: RelayState{URL: url, Bootstrap: bootstrap, Confirmed: repoindex.NewItems()}}
	e.applyRestored(r)
	e.relays[url] = r
	e.d.Health.Track(url)
	e.m.relayConnected.WithLabelValues(url).Set(float64(Disconnected))
}

// runActions is the decision point: compute_actions over all relays and
// AddFilters for each result.
func (e *Engine) runActions(targets map[string]repoindex.Target) {
	rs := make(map[string]*RelayState, len(e.relays))
	for url, r := range e.relays {
		rs[url] = &r.RelayState
	}
	for _, a := range computeActions(targets, e.pending, rs) {
		e.addFilters(a)
	}
}

// recomputeRelay runs compute_actions for one relay (relayActions: the
// diff without the relay's target).
func (e *Engine) recomputeRelay(url string) {
	r := e.relays[url]
	if r == nil || !r.Status.IsUp() {
		return
	}
	if !e.allowed(r) || !r.consolidateBy.IsZero() {
		// addFilters would defer whatever the diff holds: a relay waiting
		// for its consolidation is recomputed once it ran, not at every
		// batch that ends meanwhile.
		r.deferred = true
		return
	}
	add := relayActions(e.repos, url, e.bootstrapOK[url] && e.cfg.BootstrapAllLayers, e.pending[url], &r.RelayState)
	if !add.Empty() {
		e.addFilters(AddFilters{Relay: url, Items: add})
	}
}
