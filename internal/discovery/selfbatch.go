package discovery

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

// ApplyBatch updates the RepoSyncIndex from events seen on the own
// relay and starts whatever sync they call for.
func (d *Discovery) ApplyBatch(evs []*nostr.Event) {
	isOwn := d.isOwn
	if allow := d.deps.AllowRelay; allow != nil {
		// Refused URLs are left out before the per-announcement limit.
		isOwn = func(norm string) bool { return d.isOwn(norm) || allow(norm) != nil }
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
	boot := d.cfg.Bootstrap23
	for _, ev := range evs {
		d.noteHead(ev)
		switch ev.Kind {
		case nip34.KindRepoAnnouncement:
			if !d.hosts(ev) {
				continue
			}
			a, err := repoindex.ParseAnnouncement(ev, isOwn, d.cfg.MaxRelaysPerAnnouncement)
			if err != nil {
				continue
			}
			if a.Dropped > 0 && len(a.Relays) >= d.cfg.MaxRelaysPerAnnouncement {
				d.h.LimitHit("relays_per_announcement")
			}
			needs := d.Repos[a.Ref]
			if needs == nil {
				if d.cfg.MaxRepositories > 0 && len(d.Repos) >= d.cfg.MaxRepositories {
					d.h.LimitHit("repositories")
					continue
				}
				needs = &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
				d.Repos[a.Ref] = needs
				if o := d.orphans[a.Ref]; o != nil {
					needs.Roots.AddAll(o)
					d.orphanCount -= o.Len()
					delete(d.orphans, a.Ref)
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
			if refs, ok := nip34.RootRefs(ev); ok {
				d.applyRoot(ev.ID, refs, add)
			}
		}
	}
	d.reposGen++
	d.log.Debug("self batch applied", zap.Int("events", len(evs)), zap.Int("relays", len(delta)))
	d.deps.Applied(delta)
}

// applyRoot adds root id to the repositories of refs, and to what add
// collects for each relay asked about them; under a repository not known
// yet it waits as an orphan (addOrphan). Run goroutine.
func (d *Discovery) applyRoot(id string, refs []string, add func(url string) repoindex.Items) {
	for _, ref := range refs {
		needs := d.Repos[ref]
		if needs == nil {
			d.addOrphan(ref, id)
			continue
		}
		if needs.Roots.Has(id) {
			continue
		}
		needs.Roots.Add(id)
		for url := range needs.Relays.All() {
			add(url).Roots.Add(id)
		}
		for _, url := range d.cfg.Bootstrap23 {
			add(url).Roots.Add(id)
		}
	}
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
func (d *Discovery) addOrphan(ref, id string) {
	o := d.orphans[ref]
	if o.Has(id) {
		return
	}
	if !validRepoRef(ref) {
		return
	}
	if d.orphanCount >= maxOrphanRoots {
		d.h.LimitHit("orphan_roots")
		return
	}
	if o == nil {
		o = repoindex.NewSet()
		d.orphans[ref] = o
	}
	o.Add(id)
	d.orphanCount++
}

// dropOrphans forgets the roots whose announcement did not come: called
// once the own relay's history has been read, when any announcement it
// holds has been applied.
func (d *Discovery) dropOrphans() {
	if d.orphanCount > 0 {
		d.log.Info("root events without an announcement on the own relay ignored",
			zap.Int("roots", d.orphanCount), zap.Int("repositories", len(d.orphans)))
	}
	clear(d.orphans)
	d.orphanCount = 0
	d.reposGen++
	// Noted roots of which no repository is hosted would wait forever.
	d.unapplied.forget(func(_ string, refs []string) bool {
		return !slices.ContainsFunc(refs, func(ref string) bool { return d.Repos[ref] != nil })
	})
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
func (d *Discovery) isOwn(norm string) bool {
	if own, err := relay.NormalizeURL(d.cfg.OwnRelay); err == nil && own == norm {
		return true
	}
	if d.cfg.ServiceDomain != "" {
		host := repoindex.RelayHost(norm)
		if host == d.cfg.ServiceDomain || repoindex.HostOnly(host) == d.cfg.ServiceDomain {
			return true
		}
	}
	return false
}

// hosts applies GRASP-01 to an announcement the own relay holds: it is
// hosted when it lists the service domain in `clone` and `relays`. Without
// a service domain, or with HostAll, the own relay's acceptance decides.
func (d *Discovery) hosts(ann *nostr.Event) bool {
	return nip34.Hosted(ann, d.cfg.ServiceDomain, d.cfg.HostAll)
}
