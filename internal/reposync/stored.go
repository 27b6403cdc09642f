package reposync

import (
	"maps"
	"slices"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// The engine learns the roots the sidecar publishes from the own relay's
// self-subscription, in batches applied on the Run goroutine; the local
// index records them as present at their OK, at once. A state saved in
// between — at a stop: the batch still collecting, and what the publisher
// settles while it flushes — would hold a root in the local index and not
// in the repository index. The restart pages the own relay only from the
// save on (by created_at, which a synced history predates) and reconciles
// it against that local index, so it would never learn the root, and the
// discussion under it would never be synced. Roots the own relay stored
// for the sidecar are therefore kept here from their OK until the
// repository index has them, and the saved repository index (RepoState)
// includes them.

// maxStoredRoots bounds storedRoots: at most this many roots wait at once
// (one snapshot's worth of OKs; Config.Tick apart).
const maxStoredRoots = 200_000

// storedRoots are the roots the own relay stored for the sidecar, by id,
// with their repository references, until the repository index has them.
type storedRoots struct {
	mu    sync.Mutex
	roots map[string][]string
	gen   uint64 // counts changes
}

// noteStored takes an event the own relay has stored for the sidecar
// (ingest.Handler.OnStored: an OK true); it is called from the publisher's
// goroutine.
func (e *Engine) noteStored(ev *nostr.Event) {
	if !slices.Contains(e.cfg.SelfKinds, ev.Kind) {
		return
	}
	refs, ok := nip34.RootRefs(ev)
	if !ok {
		return
	}
	s := &e.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.roots[ev.ID]; ok {
		return
	}
	if len(s.roots) >= maxStoredRoots {
		// Only a Run goroutine stalled for a long time gets here; the
		// root is then learned when its batch is applied, and a stop
		// before that loses it as before.
		e.h.LimitHit("stored_roots")
		return
	}
	if s.roots == nil {
		s.roots = map[string][]string{}
	}
	s.roots[ev.ID] = refs
	s.gen++
}

// pruneStored forgets the stored roots the repository index now has, or
// whose repositories it does not host. Run goroutine.
func (e *Engine) pruneStored() {
	s := &e.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, refs := range s.roots {
		known := true
		for _, ref := range refs {
			if n := e.repos[ref]; n != nil && !n.Roots.has(id) {
				known = false
				break
			}
		}
		if known {
			delete(s.roots, id)
			s.gen++
		}
	}
}

// withStored returns p with the stored roots added to its Roots (a copy
// when there are any).
func (e *Engine) withStored(p PersistedRepos) PersistedRepos {
	s := &e.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Gen += s.gen // both only grow: any change changes the sum
	if len(s.roots) == 0 {
		return p
	}
	roots := maps.Clone(p.Roots)
	if roots == nil {
		roots = map[string][]string{}
	}
	for id, refs := range s.roots {
		for _, ref := range refs {
			// A fresh slice: p.Roots's are shared with the engine's last
			// snapshot.
			roots[ref] = append(slices.Clip(roots[ref]), id)
		}
	}
	p.Roots = roots
	return p
}
