package repoindex

import "github.com/nbd-wtf/go-nostr"

// Filters in handles: a relay's first batch queues one historic job per
// filter for every root and repository it is asked about, and as
// nostr.Filters they kept a string header per value (the chunks shared by
// a chunk's e, E and q filters) and a filter and tag map per job until
// they ran. A queued job holds its filter packed instead (PackedFilter);
// its filter is built when it starts.

// PackedFilter is a filter of one tag (no ids, authors, kinds, until or
// limit) whose values are handles (names).
type PackedFilter struct {
	tag   string
	chunk *packedChunk // shared by the filters of one chunk (e, E, q)
	since *nostr.Timestamp
}

// packedChunk is the values of one chunk of filters. The first of its
// filters to start builds the strings and leaves them for the others, so
// they share one value slice as nip34 built them (OwnLocalSet fills a
// chunk's values once, recentlyFilled).
type packedChunk struct {
	values []uint32
	built  []string
	left   int // filters not yet built
}

// packable tells whether f is a filter PackedFilter can hold.
func packable(f nostr.Filter) (string, bool) {
	if f.IDs != nil || f.Authors != nil || f.Kinds != nil || f.Until != nil || f.Limit != 0 || f.LimitZero || f.Search != "" || len(f.Tags) != 1 {
		return "", false
	}
	for tag, vs := range f.Tags {
		return tag, len(vs) > 0
	}
	return "", false
}

// Filter builds p's filter.
func (p PackedFilter) Filter() nostr.Filter {
	c := p.chunk
	vs := c.built
	if vs == nil {
		vs = make([]string, len(c.values))
		for i, h := range c.values {
			vs[i] = NameOf(h)
		}
	}
	if c.left--; c.left > 0 {
		c.built = vs[:len(vs):len(vs)]
	} else {
		c.built = nil // the last: the chunk holds no strings for nobody
	}
	return nostr.Filter{Tags: nostr.TagMap{p.tag: vs}, Since: p.since}
}

// FilterPacker packs the filters of one batch: consecutive filters over
// the same values (a chunk's e, E and q filters, as nip34 builds them)
// share one chunk of handles.
type FilterPacker struct {
	lastFirst *string // the chunk the last handles were made of
	last      *packedChunk
}

// Pack returns f packed, nil when f is not a filter PackedFilter can hold.
func (p *FilterPacker) Pack(f nostr.Filter) *PackedFilter {
	tag, ok := packable(f)
	if !ok {
		return nil
	}
	vs := f.Tags[tag]
	if &vs[0] != p.lastFirst || len(vs) != len(p.last.values) {
		p.last = &packedChunk{values: make([]uint32, len(vs))}
		for k, v := range vs {
			p.last.values[k] = Intern(v)
		}
		p.lastFirst = &vs[0]
	}
	p.last.left++
	return &PackedFilter{tag: tag, chunk: p.last, since: f.Since}
}
