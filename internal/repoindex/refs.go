package repoindex

import (
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// Refs are repositories and roots written on one goroutine and read by
// others: the arrival check of subscriptions whose kind filters match
// events about foreign roots too (nip34.ByKind) and hand on only those
// referring to one of them (nip34.RefersTo).
type Refs struct {
	mu    sync.RWMutex
	repos Set
	roots Set
}

// NewRefs returns empty Refs.
func NewRefs() *Refs { return &Refs{repos: NewSet(), roots: NewSet()} }

// Add records items.
func (l *Refs) Add(items Items) {
	l.mu.Lock()
	l.repos.AddAll(items.Repos)
	l.roots.AddAll(items.Roots)
	l.mu.Unlock()
}

// Refers tells whether ev refers to one of the items (nip34.RefersTo).
func (l *Refs) Refers(ev *nostr.Event) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return nip34.RefersTo(ev, l.repos.Has, l.roots.Has)
}

// ReferTo is the arrival check of kind filters for items as they are now
// (a copy: later changes to items do not change it).
func ReferTo(items Items) func(*nostr.Event) bool {
	repos, roots := NewSet(), NewSet()
	repos.AddAll(items.Repos)
	roots.AddAll(items.Roots)
	return func(ev *nostr.Event) bool { return nip34.RefersTo(ev, repos.Has, roots.Has) }
}
