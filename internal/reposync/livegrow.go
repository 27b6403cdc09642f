package reposync

import (
	"fmt"
	"slices"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// growingSub is a relay's newest live subscription of per-item filters
// for items added after its first sync: each new root or repository is
// added to it by sending its REQ again (growLive).
type growingSub struct {
	id    string
	items repoindex.Items
}

// growLive opens the live per-item filters of items (Layer 2, Layer 3 by
// `e` and `q`; the kind subscription asks the rest) in r's growing
// subscription, one for many items (one each filled the relay's budget
// under steady traffic, and each consolidation read every filter's last
// seconds again): a REQ under a new id with its filters and items' is
// opened, and the one it replaces closed at its EOSE (replaceLive), so
// nothing in between is missed and no since is needed. A full one (a
// filter's worth of values, or one message) stays open and the next one
// starts; items too many for one REQ open on their own. The caller leaves
// room for one subscription more.
func (ls liveSubs) growLive(r *remote, items repoindex.Items) {
	per := ls.e.lim.ValuesPerFilter(r.URL) // values_per_filter, or the relay's learned bound
	fits := func(base repoindex.Items) (repoindex.Items, []nostr.Filter, bool) {
		if !valuesFit(base, items, per) {
			return base, nil, false
		}
		merged := repoindex.NewItems()
		for _, from := range []repoindex.Items{base, items} {
			merged.Repos.AddAll(from.Repos)
			merged.Roots.AddAll(from.Roots)
		}
		chunks := ls.chunkLive(r, nip34.Live(nip34.Layers23ByRoot(merged.Repos.Sorted(), merged.Roots.Sorted(), per, nil)))
		return merged, chunks[0], len(chunks) == 1
	}
	old := r.growing
	if !r.growingOpen() {
		old = nil
	}
	var merged repoindex.Items
	var fs []nostr.Filter
	ok := false
	if old != nil {
		merged, fs, ok = fits(old.items)
	}
	if !ok {
		old = nil // full: it stays open as it is
		if merged, fs, ok = fits(repoindex.NewItems()); !ok {
			ls.subscribeLive(r, nip34.Layers23ByRoot(items.Repos.Sorted(), items.Roots.Sorted(), ls.e.cfg.ValuesPerFilter, nil))
			return
		}
	}
	r.liveSeq++
	r.growing = &growingSub{id: fmt.Sprintf("l%d", r.liveSeq+1), items: merged}
	ls.openLiveMatch(r, r.growing.id, fs, nil, nil)
	if old != nil {
		r.replaceLive(r.growing.id, old.id)
	}
}

// growsInto tells whether items join r's open growing subscription as
// values of its filters: no subscription and no filter more, so neither
// the relay's subscription budget nor the filter threshold calls for a
// consolidation (historic jobs running hold the budget: consolidating
// then frees nothing and reads every filter's last seconds again).
func (ls liveSubs) growsInto(r *remote, items repoindex.Items) bool {
	g := r.growing
	if !r.growingOpen() {
		return false
	}
	per := ls.e.lim.ValuesPerFilter(r.URL)
	return valuesFit(g.items, items, per) &&
		(g.items.Repos.Len() > 0 || items.Repos.Len() == 0) && (g.items.Roots.Len() > 0 || items.Roots.Len() == 0)
}

// growingOpen tells whether r has a growing subscription open.
func (r *remote) growingOpen() bool {
	if r.growing == nil {
		return false
	}
	_, open := r.live[r.growing.id]
	return open
}

// valuesFit tells whether base's and items' repositories, and their roots,
// fit per values each.
func valuesFit(base, items repoindex.Items, per int) bool {
	return base.Repos.Len()+items.Repos.Len() <= per && base.Roots.Len()+items.Roots.Len() <= per
}

// replaceLive notes that live subscription id replaces old, which is
// closed at id's EOSE: only then has the relay surely taken id's REQ, and
// what it sent on old before that is not lost (a subscription closed by
// us drops what arrives for it later).
func (r *remote) replaceLive(id, old string) {
	if r.replaces == nil {
		r.replaces = map[string]string{}
	}
	r.replaces[id] = old
}

// onLiveEOSE: a live subscription's stored events are in. The one it
// replaces is closed (replaceLive). One opened with since is replaced by
// one of the same filters without since under a new id: a live filter
// with since drops what is stored later with an older created_at (another
// relay's history synced into this one, an event signed a while before it
// was published). The kind subscription keeps its since; with no
// subscription free, one stays as it is.
func (ls liveSubs) onLiveEOSE(url string, gen uint64, id string, fs []nostr.Filter, refers func(*nostr.Event) bool) {
	r := ls.e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	if old, ok := r.replaces[id]; ok {
		delete(r.replaces, id)
		if _, open := r.live[old]; open {
			ls.closeLive(r, old)
		}
	}
	if _, open := r.live[id]; !open || id == kindSub || !slices.ContainsFunc(fs, func(f nostr.Filter) bool { return f.Since != nil }) || ls.subsFull(r) {
		return
	}
	r.liveSeq++
	nid := fmt.Sprintf("l%d", r.liveSeq+1)
	ls.openLiveMatch(r, nid, nip34.Live(fs), refers, nil)
	r.replaceLive(nid, id)
}

// subsFull tells whether r has no subscription free for one more REQ: its
// live subscriptions, the historic jobs running and the fetches they lend
// slots to hold its budget.
func (ls liveSubs) subsFull(r *remote) bool {
	return len(r.live)+r.running+ls.e.sched.lender(r).InUse()+1 >= ls.e.d.Health.SubscriptionBudget(r.URL)
}
