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
// `e` and `q`; the kind subscription asks the rest) by adding them to r's
// growing subscription, whose REQ is sent again with since now −
// consolidation_overlap (the seconds the replacement could miss; it asks
// recent items, which have little). Before, each new item opened a
// subscription of its own: at a steady rate of new roots the relay's
// subscription budget filled every second or two, and each consolidation
// read the last consolidation_overlap of every filter of the relay again.
// A growing subscription holding a filter's worth of values, or whose REQ
// would outgrow one message, is left as it is and the next one starts;
// items too many for one REQ open as subscriptions of their own.
func (ls liveSubs) growLive(r *remote, items repoindex.Items) {
	per := ls.growPer(r)
	since := nostr.Timestamp(ls.e.clock.Now().Add(-ls.e.cfg.ConsolidationOverlap).Unix())
	fits := func(g *growingSub) ([]nostr.Filter, bool) {
		if g.items.Repos.Len()+items.Repos.Len() > per || g.items.Roots.Len()+items.Roots.Len() > per {
			return nil, false
		}
		merged := repoindex.NewItems()
		for _, from := range []repoindex.Items{g.items, items} {
			merged.Repos.AddAll(from.Repos)
			merged.Roots.AddAll(from.Roots)
		}
		chunks := ls.chunkLive(r, nip34.Layers23ByRoot(merged.Repos.Sorted(), merged.Roots.Sorted(), per, &since))
		if len(chunks) != 1 {
			return nil, false
		}
		g.items = merged
		return chunks[0], true
	}
	g := r.growing
	if _, open := r.live[g.idOrNone()]; !open {
		g = nil
	}
	fs, ok := []nostr.Filter(nil), false
	if g != nil {
		fs, ok = fits(g)
	}
	if !ok {
		g = &growingSub{items: repoindex.NewItems()}
		if fs, ok = fits(g); !ok {
			ls.subscribeLive(r, nip34.Layers23ByRoot(items.Repos.Sorted(), items.Roots.Sorted(), ls.e.cfg.ValuesPerFilter, nil))
			return
		}
		r.liveSeq++
		g.id = fmt.Sprintf("l%d", r.liveSeq+1)
	}
	r.growing = g
	ls.openLiveMatch(r, g.id, fs, nil, nil) // a REQ with an open id replaces it
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
