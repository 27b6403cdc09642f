package discovery

import (
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// PersistedRepos is the repository index as a state store keeps it
// (persisted.Repos).
type PersistedRepos = persisted.Repos

// RepoState returns the persistable repository index as of the last status
// refresh, with the roots on the own relay its batches had not applied
// (unappliedroots.go). Until it is first asked the index is not copied at all (a copy
// of every root at each refresh is memory only a state store needs); the
// first call refreshes at once when the engine is running.
func (d *Discovery) RepoState() PersistedRepos {
	if !d.reposWanted.Swap(true) {
		d.deps.Refresh()
	}
	return d.repoStateWithUnapplied()
}

// RestoreRepos hands the engine the previous run's repository index; call
// it before Run.
func (d *Discovery) RestoreRepos(p PersistedRepos) {
	if p.SelfSeen.IsZero() || len(p.Roots) == 0 {
		return // nothing to resume from: the history is read in full
	}
	for ref, roots := range p.Roots {
		if !validRepoRef(ref) {
			continue
		}
		o := d.orphans[ref]
		if o == nil {
			o = repoindex.NewSet()
			d.orphans[ref] = o
		}
		for _, id := range roots {
			if !o.Has(id) {
				o.Add(id)
				d.orphanCount++ // not bounded by maxOrphanRoots: all were accepted before
			}
		}
	}
	d.restoredSelfSeen = p.SelfSeen
	d.reposGen++
	d.restoreHeads(p.Heads)
}

// snapshotRepos copies the repository index when it changed since the
// last copy.
func (d *Discovery) snapshotRepos() (PersistedRepos, bool) {
	last := d.reposSnapCopy()
	if d.reposGen == last.Gen && d.headsGen == last.HeadsGen {
		return PersistedRepos{}, false
	}
	p := PersistedRepos{Gen: d.reposGen, HeadsGen: d.headsGen, Roots: last.Roots, Heads: last.Heads}
	if d.headsGen != last.HeadsGen {
		p.Heads = d.headList()
	}
	if d.reposGen == last.Gen {
		return p, true
	}
	p.Roots = make(map[string][]string, len(d.Repos)+len(d.orphans))
	for ref, n := range d.Repos {
		p.Roots[ref] = n.Roots.List()
	}
	for ref, o := range d.orphans {
		p.Roots[ref] = append(p.Roots[ref], o.List()...)
	}
	return p, true
}

func (d *Discovery) reposSnapCopy() PersistedRepos {
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	return d.reposSnap
}

func (d *Discovery) selfSeenTime() time.Time {
	if d.selfLive.Load() && d.historyBatches.Load() == 0 {
		return d.clock.Now()
	}
	if ns := d.selfSeen.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return d.restoredSelfSeen
}

// selfHistoryFilters are the own-relay filters of a self-subscription's
// paging: everything since since; after a restore without usable heads
// (headsUsable), announcements and states in full.
func (d *Discovery) selfHistoryFilters(since *nostr.Timestamp, restored bool) []nostr.Filter {
	if !restored || since == nil || d.headsUsable() {
		return []nostr.Filter{{Kinds: d.cfg.SelfKinds, Since: since}}
	}
	var full, rest []int
	for _, k := range d.cfg.SelfKinds {
		if k == nip34.KindRepoAnnouncement || k == nip34.KindRepoState {
			full = append(full, k)
		} else {
			rest = append(rest, k)
		}
	}
	var fs []nostr.Filter
	if len(full) > 0 {
		fs = append(fs, nostr.Filter{Kinds: full})
	}
	if len(rest) > 0 {
		fs = append(fs, nostr.Filter{Kinds: rest, Since: since})
	}
	return fs
}

// lostMin: a catch-up finding the own relay lacks more than this many
// indexed events (or a tenth of the index) means it lost data while the
// sidecar was down (a wiped or restored database).
const lostMin = 1000

// PublishRepos applies the roots that waited too long for their batch
// (applyOverdue), then publishes a persistable copy of the repository
// index, when RepoState was ever asked and the index changed since the
// last copy, with the self-subscription's read point; then it forgets the
// unapplied roots the index holds (with a state store, those the
// published copy holds). Run goroutine (the engine's status refresh).
func (d *Discovery) PublishRepos() {
	d.applyOverdue()
	var repos PersistedRepos
	changed := false
	wanted := d.reposWanted.Load()
	if wanted {
		repos, changed = d.snapshotRepos()
	}
	d.snapMu.Lock()
	if changed {
		d.reposSnap = repos
	}
	d.reposSnap.SelfSeen = d.selfSeenTime()
	d.snapMu.Unlock()
	// With a state store, now that a snapshot of the index as it is was
	// published.
	d.unapplied.forget(d.rootApplied)
}
