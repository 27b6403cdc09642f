package reposync

import (
	"sync"

	"github.com/nbd-wtf/go-nostr"

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

// liveRefs are the repositories and roots a relay's kind subscription
// hands events on for: every item added to the relay (deferred, pending or
// confirmed) from when it is added, so that a reply to a comment arriving
// before its root's per-root filters are open is kept. Written on the Run goroutine,
// read by the subscription's.
type liveRefs struct {
	mu    sync.RWMutex
	repos repoindex.Set
	roots repoindex.Set
}

func newLiveRefs() *liveRefs { return &liveRefs{repos: repoindex.NewSet(), roots: repoindex.NewSet()} }

// add records items.
func (l *liveRefs) add(items repoindex.Items) {
	l.mu.Lock()
	l.repos.AddAll(items.Repos)
	l.roots.AddAll(items.Roots)
	l.mu.Unlock()
}

// refers tells whether ev refers to one of the items (nip34.RefersTo).
func (l *liveRefs) refers(ev *nostr.Event) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return nip34.RefersTo(ev, l.repos.Has, l.roots.Has)
}

// refsOf returns r's liveRefs for its current connection.
func (ls liveSubs) refsOf(r *remote) *liveRefs {
	if r.refs == nil {
		r.refs = newLiveRefs()
	}
	return r.refs
}

// openKindSub opens r's kind subscription with since unless it is open.
func (ls liveSubs) openKindSub(r *remote, since nostr.Timestamp) {
	if _, open := r.live[kindSub]; open {
		return
	}
	ls.openLiveMatch(r, kindSub, nip34.Layer3ByKind(&since), ls.refsOf(r).refers, nil)
}

// layers23ByRoot are the per-root filters of a consolidation: Layer 2 and
// Layer 3's `e` and `q` (the kind subscription asks the rest).
func layers23ByRoot(repos, roots []string, perFilter int, since *nostr.Timestamp) []nostr.Filter {
	return append(nip34.Layer2(repos, perFilter, since), nip34.Layer3ByRoot(roots, perFilter, since)...)
}
