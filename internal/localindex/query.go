package localindex

import (
	"fmt"
	"math"
	"slices"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
)

// query is a filter translated to the index's interned indexes.
type query struct {
	since, until int64
	kinds        []int
	authors      map[uint32]struct{} // nil: any author
	tagConds     []map[uint32]struct{}
	none         bool // some condition can match nothing
}

func (x *Index) compile(f nostr.Filter) (query, error) {
	q := query{since: math.MinInt64, until: math.MaxInt64, kinds: f.Kinds}
	if f.Search != "" {
		return q, fmt.Errorf("%w: search", ErrCannotAnswer)
	}
	if f.Since != nil {
		q.since = int64(*f.Since)
	}
	if f.Until != nil {
		q.until = int64(*f.Until)
	}
	if f.Kinds != nil && len(f.Kinds) == 0 {
		q.none = true
	}
	if f.Authors != nil {
		q.authors = make(map[uint32]struct{}, len(f.Authors))
		for _, a := range f.Authors {
			if k, ok := event.DecodeID(a); ok {
				if idx, ok := x.authors.lookup(&k); ok {
					q.authors[idx] = struct{}{}
				}
			}
		}
		if len(q.authors) == 0 {
			q.none = true
		}
	}
	for name, vals := range f.Tags {
		if vals == nil {
			continue // nostr.Filter.Matches ignores a nil value list
		}
		code, ok := letterCode(name)
		if !ok {
			return q, fmt.Errorf("%w: tag filter #%s", ErrCannotAnswer, name)
		}
		set := make(map[uint32]struct{}, len(vals))
		for _, v := range vals {
			if k, ok := event.DecodeID(v); ok {
				if idx, ok := x.hexVals.lookup(&k); ok {
					set[code<<29|refHexBit|idx] = struct{}{}
				}
			} else if idx, ok := x.strVals.lookup(v); ok {
				set[code<<29|idx] = struct{}{}
			}
		}
		// An empty set still matches truncated entries, so it is kept.
		q.tagConds = append(q.tagConds, set)
	}
	return q, nil
}

func (x *Index) matches(q *query, slot uint32, e *entry) bool {
	if c := x.createdAt(slot, e); c < q.since || c > q.until {
		return false
	}
	if q.kinds != nil && !slices.Contains(q.kinds, int(x.kindOf(slot, e))) {
		return false
	}
	if q.authors != nil {
		if _, ok := q.authors[e.author()]; !ok {
			return false
		}
	}
	if len(q.tagConds) > 0 && e.meta&flagTruncated == 0 {
		refs := x.tags.of(e.tagOff, e.tagN)
		for _, set := range q.tagConds {
			found := false
			for _, r := range refs {
				if _, ok := set[r]; ok {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// AppendMatching appends the (created_at, id) of every indexed event that
// matches f, in no particular order, and returns the extended slice. It
// supports ids, kinds, authors, since, until and #a #A #q #e #E #d tag
// filters (limit is ignored); anything else returns ErrCannotAnswer so the
// caller can fall back to asking the relay. Events whose tags were
// truncated (Options.MaxTagsPerEvent) match every tag condition.
func (x *Index) AppendMatching(dst []neg.Item, f nostr.Filter) ([]neg.Item, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	q, err := x.compile(f)
	if err != nil {
		return dst, err
	}
	if q.none {
		return dst, nil
	}
	if f.IDs != nil {
		for _, id := range f.IDs {
			k, ok := event.DecodeID(id)
			if !ok {
				continue
			}
			if slot, ok := x.ids.find(&k); ok && x.matches(&q, slot, x.entries.at(slot)) {
				e := x.entries.at(slot)
				dst = append(dst, neg.Item{CreatedAt: nostr.Timestamp(x.createdAt(slot, e)), ID: e.id})
			}
		}
		return dst, nil
	}
	if len(q.tagConds) > 0 {
		// Candidates come from the posting lists of the most selective
		// tag condition (plus entries with cut tags, which match any).
		best, bestN := 0, -1
		for i, set := range q.tagConds {
			n := 0
			for ref := range set {
				n += x.postings.count(ref)
			}
			if bestN < 0 || n < bestN {
				best, bestN = i, n
			}
		}
		seen := make(map[uint32]struct{}, bestN+len(x.truncated))
		add := func(slot uint32) {
			if _, dup := seen[slot]; dup {
				return
			}
			seen[slot] = struct{}{}
			if e := x.entries.at(slot); e.live() && x.matches(&q, slot, e) {
				dst = append(dst, neg.Item{CreatedAt: nostr.Timestamp(x.createdAt(slot, e)), ID: e.id})
			}
		}
		var one [1]uint32
		for ref := range q.tagConds[best] {
			for _, slot := range x.postings.slots(ref, &one) {
				add(slot)
			}
		}
		for slot := range x.truncated {
			add(slot)
		}
		return dst, nil
	}
	for i := range x.entries.len() {
		e := x.entries.at(uint32(i))
		if e.live() && x.matches(&q, uint32(i), e) {
			dst = append(dst, neg.Item{CreatedAt: nostr.Timestamp(x.createdAt(uint32(i), e)), ID: e.id})
		}
	}
	return dst, nil
}

// Source supplies extra items for a negentropy set, such as ids held in
// purgatory or known to be rejected: "we have it or do not want it".
type Source interface {
	// AppendItems appends the source's items for filter f. Items outside
	// f are harmless (they only add to our side of the set).
	AppendItems(dst []neg.Item, f nostr.Filter) []neg.Item
}

// SourceFunc adapts a function to Source.
type SourceFunc func(dst []neg.Item, f nostr.Filter) []neg.Item

// AppendItems calls fn.
func (fn SourceFunc) AppendItems(dst []neg.Item, f nostr.Filter) []neg.Item { return fn(dst, f) }

// Storage builds the negentropy local set for f: the indexed events that
// match it, united with the items of extra sources (duplicates removed).
func (x *Index) Storage(f nostr.Filter, extra ...Source) (*neg.Storage, error) {
	items, err := x.AppendMatching(nil, f)
	if err != nil {
		return nil, err
	}
	for _, s := range extra {
		items = s.AppendItems(items, f)
	}
	return neg.NewStorage(items), nil
}

// LocalFunc returns a neg.LocalFunc that builds local sets with Storage.
func (x *Index) LocalFunc(extra ...Source) neg.LocalFunc {
	return func(f nostr.Filter) (*neg.Storage, error) { return x.Storage(f, extra...) }
}
