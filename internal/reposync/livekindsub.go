package reposync

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// Live Layer 3 by kind in consolidations: a consolidation opens the
// per-root filters of nip34.Layer3ByRoot (`e` and `q`) and keeps one
// subscription of the two kind filters (nip34.Layer3ByKind, in place of
// the per-root `E` filters, a third of the per-root bytes) open across
// consolidations: its since-bounded catch-up, which brings every comment
// and PR update of the relay since then, is asked once per connection,
// not at every consolidation. What it brings is handed on only when it
// refers to an item of the relay (liveRefs).

// kindSub is the id of a relay's kept-open kind subscription.
const kindSub = "lk"

// refsOf returns the repositories and roots r's kind subscription hands
// events on for: every item added to the relay (deferred, pending or
// confirmed) from when it is added, so that a reply to a comment arriving
// before its root's per-root filters are open is kept. Written on the Run
// goroutine, read by the subscription's; one set per connection.
func (ls liveSubs) refsOf(r *remote) *repoindex.Refs {
	if r.refs == nil {
		r.refs = repoindex.NewRefs()
	}
	return r.refs
}

// openKindSub opens r's kind subscription with since unless it is open.
func (ls liveSubs) openKindSub(r *remote, since nostr.Timestamp) {
	if _, open := r.live[kindSub]; open {
		return
	}
	ls.openLiveMatch(r, kindSub, ls.kindFilters(r, &since), ls.refsOf(r).Refers, nil)
}

// kindFilters: nip34.Layer3ByKindWithin the relay's learned bounds, one REQ.
func (ls liveSubs) kindFilters(r *remote, since *nostr.Timestamp) []nostr.Filter {
	per := ls.e.lim.ValuesPerFilter(r.URL)
	fit := func(fs []nostr.Filter) []nostr.Filter { return historic.FitTagValues(fs, per) }
	return nip34.Layer3ByKindWithin(since, ls.e.d.Health.Limits(r.URL).MaxFilters, fit)
}
