package harness

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fiatjaf/eventstore"
	"github.com/nbd-wtf/go-nostr"
)

// indexedTags are the single-letter tags the Store indexes; filters on them
// (the sidecar's layer 2 and 3 subscriptions) avoid a full scan.
var indexedTags = [...]string{"a", "A", "e", "E", "q", "p", "d"}

func isIndexedTag(name string) bool {
	for _, t := range indexedTags {
		if t == name {
			return true
		}
	}
	return false
}

type tagKey struct {
	name  string
	value string
}

// Store is an in-memory, concurrency-safe event store with no silent query
// cap: a query without a limit returns every matching event. It implements the
// hooks khatru needs (eventstore.Store) and is what every harness relay keeps
// across Stop and Restart.
//
// Events are kept sorted by (created_at, id); queries return them newest
// first. Replaceable and addressable kinds keep only their newest version.
// Events returned by queries are shared with the store: do not modify them.
type Store struct {
	mu     sync.RWMutex
	events []*nostr.Event // ascending by (created_at, id)
	byID   map[string]*nostr.Event
	byAddr map[string]*nostr.Event // newest replaceable/addressable per address
	byTag  map[tagKey][]*nostr.Event
	kinds  map[int]int
}

var _ eventstore.Store = (*Store)(nil)

// NewStore returns an empty Store.
func NewStore() *Store {
	s := &Store{}
	s.reset()
	return s
}

func (s *Store) reset() {
	s.events = nil
	s.byID = make(map[string]*nostr.Event)
	s.byAddr = make(map[string]*nostr.Event)
	s.byTag = make(map[tagKey][]*nostr.Event)
	s.kinds = make(map[int]int)
}

// Init implements eventstore.Store; the store is ready after NewStore.
func (s *Store) Init() error { return nil }

// Close implements eventstore.Store; it does nothing.
func (s *Store) Close() {}

func compareEvents(a, b *nostr.Event) int {
	if c := cmp.Compare(a.CreatedAt, b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// addressOf returns the replacement key of a replaceable or addressable event
// and whether it has one.
func addressOf(ev *nostr.Event) (string, bool) {
	switch {
	case nostr.IsAddressableKind(ev.Kind):
		return fmt.Sprintf("%d:%s:%s", ev.Kind, ev.PubKey, ev.Tags.GetD()), true
	case nostr.IsReplaceableKind(ev.Kind):
		return fmt.Sprintf("%d:%s:", ev.Kind, ev.PubKey), true
	}
	return "", false
}

// isNewer reports whether a replaces b under NIP-01 rules (newer created_at,
// ties broken by the lowest id).
func isNewer(a, b *nostr.Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID < b.ID
}

func insertSorted(list []*nostr.Event, ev *nostr.Event) []*nostr.Event {
	if n := len(list); n == 0 || compareEvents(list[n-1], ev) < 0 {
		return append(list, ev)
	}
	i, _ := slices.BinarySearchFunc(list, ev, compareEvents)
	return slices.Insert(list, i, ev)
}

func removeSorted(list []*nostr.Event, ev *nostr.Event) []*nostr.Event {
	i, found := slices.BinarySearchFunc(list, ev, compareEvents)
	if !found {
		return list
	}
	return slices.Delete(list, i, i+1)
}

// add inserts ev (not yet present); bulk appends without keeping order, the
// caller must call sortAll afterwards.
func (s *Store) add(ev *nostr.Event, bulk bool, dirty map[tagKey]struct{}) {
	s.byID[ev.ID] = ev
	s.kinds[ev.Kind]++
	if addr, ok := addressOf(ev); ok {
		s.byAddr[addr] = ev
	}
	if bulk {
		s.events = append(s.events, ev)
	} else {
		s.events = insertSorted(s.events, ev)
	}
	var buf [8]tagKey
	seen := buf[:0]
	for _, tag := range ev.Tags {
		if len(tag) < 2 || len(tag[0]) != 1 || !isIndexedTag(tag[0]) {
			continue
		}
		k := tagKey{tag[0], tag[1]}
		if slices.Contains(seen, k) {
			continue
		}
		seen = append(seen, k)
		if bulk {
			s.byTag[k] = append(s.byTag[k], ev)
			dirty[k] = struct{}{}
		} else {
			s.byTag[k] = insertSorted(s.byTag[k], ev)
		}
	}
}

func (s *Store) remove(ev *nostr.Event) {
	if _, ok := s.byID[ev.ID]; !ok {
		return
	}
	delete(s.byID, ev.ID)
	if s.kinds[ev.Kind]--; s.kinds[ev.Kind] <= 0 {
		delete(s.kinds, ev.Kind)
	}
	if addr, ok := addressOf(ev); ok && s.byAddr[addr] == ev {
		delete(s.byAddr, addr)
	}
	s.events = removeSorted(s.events, ev)
	for _, tag := range ev.Tags {
		if len(tag) < 2 || len(tag[0]) != 1 || !isIndexedTag(tag[0]) {
			continue
		}
		k := tagKey{tag[0], tag[1]}
		list := removeSorted(s.byTag[k], ev)
		if len(list) == 0 {
			delete(s.byTag, k)
		} else {
			s.byTag[k] = list
		}
	}
}

// save stores ev applying replacement rules. It returns whether ev was stored
// and eventstore.ErrDupEvent when it was already present.
func (s *Store) save(ev *nostr.Event) (bool, error) {
	if _, dup := s.byID[ev.ID]; dup {
		return false, eventstore.ErrDupEvent
	}
	if addr, ok := addressOf(ev); ok {
		if prev := s.byAddr[addr]; prev != nil {
			if !isNewer(ev, prev) {
				return false, nil
			}
			s.remove(prev)
		}
	}
	s.add(ev, false, nil)
	return true, nil
}

// saveReport stores ev and reports whether it was stored (false for an
// older version of a replaceable event); a duplicate is eventstore.ErrDupEvent.
func (s *Store) saveReport(ev *nostr.Event) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save(ev)
}

// SaveEvent implements eventstore.Store.
func (s *Store) SaveEvent(_ context.Context, ev *nostr.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.save(ev)
	return err
}

// ReplaceEvent implements eventstore.Store: it stores ev unless a newer
// version of its address is present, removing older versions.
func (s *Store) ReplaceEvent(ctx context.Context, ev *nostr.Event) error {
	return s.SaveEvent(ctx, ev)
}

// DeleteEvent implements eventstore.Store.
func (s *Store) DeleteEvent(_ context.Context, ev *nostr.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.byID[ev.ID]; cur != nil {
		s.remove(cur)
	}
	return nil
}

// Put stores events directly, applying replacement rules, and returns how
// many were stored (duplicates and superseded versions are skipped). Large
// batches are appended and sorted once, so loading 10^5–10^6 events is fast.
func (s *Store) Put(evs ...*nostr.Event) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := 0
	if len(evs) < 64 {
		for _, ev := range evs {
			if ok, _ := s.save(ev); ok {
				stored++
			}
		}
		return stored
	}
	dirty := make(map[tagKey]struct{})
	removed := make(map[*nostr.Event]struct{})
	batch := make(map[*nostr.Event]struct{})
	for _, ev := range evs {
		if _, dup := s.byID[ev.ID]; dup {
			continue
		}
		if addr, ok := addressOf(ev); ok {
			if prev := s.byAddr[addr]; prev != nil {
				if !isNewer(ev, prev) {
					continue
				}
				s.unindex(prev, dirty)
				removed[prev] = struct{}{}
				if _, ok := batch[prev]; ok {
					stored--
				}
			}
			batch[ev] = struct{}{}
		}
		s.add(ev, true, dirty)
		stored++
	}
	gone := func(ev *nostr.Event) bool { _, ok := removed[ev]; return ok }
	if len(removed) > 0 {
		s.events = slices.DeleteFunc(s.events, gone)
	}
	slices.SortFunc(s.events, compareEvents)
	for k := range dirty {
		list := s.byTag[k]
		if len(removed) > 0 {
			list = slices.DeleteFunc(list, gone)
		}
		if len(list) == 0 {
			delete(s.byTag, k)
			continue
		}
		slices.SortFunc(list, compareEvents)
		s.byTag[k] = list
	}
	return stored
}

// unindex drops ev from the id, address and kind indexes and marks its tag
// lists dirty; the caller removes it from the lists (bulk Put).
func (s *Store) unindex(ev *nostr.Event, dirty map[tagKey]struct{}) {
	delete(s.byID, ev.ID)
	if s.kinds[ev.Kind]--; s.kinds[ev.Kind] <= 0 {
		delete(s.kinds, ev.Kind)
	}
	if addr, ok := addressOf(ev); ok && s.byAddr[addr] == ev {
		delete(s.byAddr, addr)
	}
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && len(tag[0]) == 1 && isIndexedTag(tag[0]) {
			dirty[tagKey{tag[0], tag[1]}] = struct{}{}
		}
	}
}

// Remove deletes the events with the given ids and returns how many existed.
func (s *Store) Remove(ids ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if ev := s.byID[id]; ev != nil {
			s.remove(ev)
			n++
		}
	}
	return n
}

// Get returns the event with the given id, or nil.
func (s *Store) Get(id string) *nostr.Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// Len returns the number of stored events.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.events)
}

// IDs returns the ids of all stored events, newest first.
func (s *Store) IDs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, len(s.events))
	for i, ev := range s.events {
		ids[len(ids)-1-i] = ev.ID
	}
	return ids
}

// Match returns the events matching filter, newest first, honouring
// filter.Limit when it is positive (limit 0 means no limit here) and then
// maxLimit when it is positive.
func (s *Store) Match(filter nostr.Filter, maxLimit int) []*nostr.Event {
	limit := filter.Limit
	if maxLimit > 0 && (limit <= 0 || limit > maxLimit) {
		limit = maxLimit
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.match(filter, limit)
}

func (s *Store) match(filter nostr.Filter, limit int) []*nostr.Event {
	if filter.Kinds != nil {
		present := false
		for _, k := range filter.Kinds {
			if s.kinds[k] > 0 {
				present = true
				break
			}
		}
		if !present {
			return nil
		}
	}
	if candidates, ok := s.candidates(filter); ok {
		var out []*nostr.Event
		for _, ev := range candidates {
			if filter.Matches(ev) {
				out = append(out, ev)
			}
		}
		slices.SortFunc(out, func(a, b *nostr.Event) int { return compareEvents(b, a) })
		if limit > 0 && len(out) > limit {
			out = out[:limit]
		}
		return out
	}
	// scan the time range newest first
	lo, hi := 0, len(s.events)
	if filter.Since != nil {
		lo, _ = slices.BinarySearchFunc(s.events, *filter.Since, func(ev *nostr.Event, t nostr.Timestamp) int {
			return cmp.Compare(ev.CreatedAt, t)
		})
	}
	if filter.Until != nil {
		hi, _ = slices.BinarySearchFunc(s.events, *filter.Until+1, func(ev *nostr.Event, t nostr.Timestamp) int {
			return cmp.Compare(ev.CreatedAt, t)
		})
	}
	var out []*nostr.Event
	for i := hi - 1; i >= lo; i-- {
		if ev := s.events[i]; filter.Matches(ev) {
			out = append(out, ev)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}

// candidates narrows a filter to the events found through the id or tag
// indexes. It returns false when the filter needs a full scan.
func (s *Store) candidates(filter nostr.Filter) ([]*nostr.Event, bool) {
	if filter.IDs != nil {
		out := make([]*nostr.Event, 0, len(filter.IDs))
		seen := make(map[*nostr.Event]struct{}, len(filter.IDs))
		for _, id := range filter.IDs {
			if ev := s.byID[id]; ev != nil {
				if _, dup := seen[ev]; !dup {
					seen[ev] = struct{}{}
					out = append(out, ev)
				}
			}
		}
		return out, true
	}
	best, bestSize := "", -1
	for name, values := range filter.Tags {
		if !isIndexedTag(name) || values == nil {
			continue
		}
		size := 0
		for _, v := range values {
			size += len(s.byTag[tagKey{name, v}])
		}
		if bestSize < 0 || size < bestSize {
			best, bestSize = name, size
		}
	}
	if bestSize < 0 {
		return nil, false
	}
	values := filter.Tags[best]
	if len(values) == 1 {
		return s.byTag[tagKey{best, values[0]}], true
	}
	seen := make(map[*nostr.Event]struct{}, bestSize)
	out := make([]*nostr.Event, 0, bestSize)
	for _, v := range values {
		for _, ev := range s.byTag[tagKey{best, v}] {
			if _, dup := seen[ev]; !dup {
				seen[ev] = struct{}{}
				out = append(out, ev)
			}
		}
	}
	return out, true
}

// QueryEvents implements eventstore.Store. It is uncapped: without a limit it
// returns every matching event.
func (s *Store) QueryEvents(ctx context.Context, filter nostr.Filter) (chan *nostr.Event, error) {
	return streamEvents(ctx, s.Match(filter, 0)), nil
}

// CountEvents implements eventstore.Store.
func (s *Store) CountEvents(_ context.Context, filter nostr.Filter) (int64, error) {
	filter.Limit = 0
	return int64(len(s.Match(filter, 0))), nil
}

func streamEvents(ctx context.Context, evs []*nostr.Event) chan *nostr.Event {
	ch := make(chan *nostr.Event)
	go func() {
		defer close(ch)
		for _, ev := range evs {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
