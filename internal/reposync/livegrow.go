package reposync

import (
	"fmt"

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
// subscription: a REQ under a new id with the growing one's filters and
// items' is opened, and the one it replaces closed at its EOSE (replaceLive), so no event stored
// in between is missed and the filters need no since (a live filter with
// since drops events stored late with an older created_at). Before, each
// new item opened a subscription of its own: at a steady rate of new roots
// the relay's subscription budget filled every second or two, and each
// consolidation read the last consolidation_overlap of every filter of the
// relay again. A growing subscription holding a filter's worth of values,
// or whose REQ would outgrow one message, is left open as it is and the
// next one starts; items too many for one REQ open as subscriptions of
// their own. The caller leaves room for one subscription more.
func (ls liveSubs) growLive(r *remote, items repoindex.Items) {
	per := ls.growPer(r)
	fits := func(base repoindex.Items) (repoindex.Items, []nostr.Filter, bool) {
		if base.Repos.Len()+items.Repos.Len() > per || base.Roots.Len()+items.Roots.Len() > per {
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
	if _, open := r.live[old.idOrNone()]; !open {
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
	if _, open := r.live[g.idOrNone()]; !open {
		return false
	}
	per := ls.growPer(r)
	return g.items.Repos.Len()+items.Repos.Len() <= per && g.items.Roots.Len()+items.Roots.Len() <= per &&
		(g.items.Repos.Len() > 0 || items.Repos.Len() == 0) && (g.items.Roots.Len() > 0 || items.Roots.Len() == 0)
}

func (g *growingSub) idOrNone() string {
	if g == nil {
		return ""
	}
	return g.id
}

// growPer is how many values a growing subscription's filters take: the
// relay's learned bound on tag values, or sync.values_per_filter.
func (ls liveSubs) growPer(r *remote) int {
	if per := ls.e.lim.ValuesPerFilter(r.URL); per > 0 {
		return per
	}
	return ls.e.cfg.ValuesPerFilter
}
