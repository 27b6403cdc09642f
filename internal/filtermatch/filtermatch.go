// Package filtermatch compiles nostr filters into a matcher that searches
// their value lists instead of scanning them, for checking each event a
// relay sends against the filters it was asked.
package filtermatch

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nbd-wtf/go-nostr"
)

// Matcher is nostr.Filters(fs).Match with the value lists searched,
// not scanned: a historic job or live subscription carries up to hundreds
// of filters of 100 tag values each, and go-nostr compares an arriving
// event's tags with every value of every filter. Filters that differ only
// in the values of their one tag (the chunks of nip34.Layers23) are merged
// into one whose values are the union: an event matches one of them
// exactly when it matches the union. The value lists are kept as they are
// (sorted by nip34, shared with the filters): a lookup is a binary search
// over the chunks and within one, no copy into a map per subscription.
type Matcher []matchFilter

// matchFilter is one filter of a Matcher. A nil *valueRuns or a
// false kindsOn is no constraint (a nil list in the filter); an empty one
// matches nothing (an empty list), as in go-nostr.
type matchFilter struct {
	ids, authors *valueRuns
	kinds        []int
	kindsOn      bool
	tags         []tagValues
	since, until *nostr.Timestamp
	// byKind marks filters whose matches must also pass a reference check
	// (New's byKind).
	byKind bool
}

type tagValues struct {
	name   string
	values *valueRuns
}

// New compiles fs; byKind, when set, marks the filters it holds for
// (nip34.ByKind): their matches must also pass a reference check
// (MatchSplit, Checked).
func New(fs []nostr.Filter, byKind func(nostr.Filter) bool) Matcher {
	var out Matcher
	var groups []*mergeGroup
	for _, f := range fs {
		bk := byKind != nil && byKind(f)
		tags := 0
		var name string
		for n, v := range f.Tags {
			if v != nil {
				tags++
				name = n
			}
		}
		if f.IDs == nil && f.Authors == nil && tags == 1 {
			g := findGroup(groups, f, name, bk)
			if g == nil {
				g = &mergeGroup{f: f, name: name, byKind: bk}
				groups = append(groups, g)
			}
			g.lists = append(g.lists, f.Tags[name])
			continue
		}
		out = append(out, compileFilter(f, bk))
	}
	for _, g := range groups {
		m := compileFilter(nostr.Filter{Kinds: g.f.Kinds, Since: g.f.Since, Until: g.f.Until}, g.byKind)
		m.tags = []tagValues{{name: g.name, values: newValueRuns(g.lists)}}
		out = append(out, m)
	}
	return out
}

// mergeGroup is the filters with one tag constraint, named name, that are
// alike in everything else (kinds, since, until).
type mergeGroup struct {
	f      nostr.Filter
	name   string
	byKind bool
	lists  [][]string
}

func findGroup(groups []*mergeGroup, f nostr.Filter, name string, byKind bool) *mergeGroup {
	for _, g := range groups {
		if g.name == name && g.byKind == byKind && (g.f.Kinds == nil) == (f.Kinds == nil) && slices.Equal(g.f.Kinds, f.Kinds) &&
			sameTS(g.f.Since, f.Since) && sameTS(g.f.Until, f.Until) {
			return g
		}
	}
	return nil
}

func sameTS(a, b *nostr.Timestamp) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func compileFilter(f nostr.Filter, byKind bool) matchFilter {
	m := matchFilter{kinds: f.Kinds, kindsOn: f.Kinds != nil, byKind: byKind}
	if f.IDs != nil {
		m.ids = newValueRuns([][]string{f.IDs})
	}
	if f.Authors != nil {
		m.authors = newValueRuns([][]string{f.Authors})
	}
	for n, v := range f.Tags {
		if v != nil {
			m.tags = append(m.tags, tagValues{name: n, values: newValueRuns([][]string{v})})
		}
	}
	if f.Since != nil {
		s := *f.Since
		m.since = &s
	}
	if f.Until != nil {
		u := *f.Until
		m.until = &u
	}
	return m
}

// Match tells whether one of the filters matches ev (nostr.Filters.Match).
func (fm Matcher) Match(ev *nostr.Event) bool {
	if ev == nil {
		return false
	}
	for i := range fm {
		if fm[i].matches(ev) {
			return true
		}
	}
	return false
}

// MatchSplit tells whether a filter without byKind matches ev, and
// whether one with byKind does.
func (fm Matcher) MatchSplit(ev *nostr.Event) (plain, byKind bool) {
	if ev == nil {
		return false, false
	}
	for i := range fm {
		if (byKind && fm[i].byKind) || !fm[i].matches(ev) {
			continue
		}
		if !fm[i].byKind {
			return true, byKind
		}
		byKind = true
	}
	return false, byKind
}

// Checked is a subscription's check of what arrives: one of fs matches
// it, and for a filter byKind holds for, refers also holds (an event of
// the kinds asked must refer to something the subscription is about).
// The filters are compiled once.
func Checked(fs []nostr.Filter, byKind func(nostr.Filter) bool, refers func(*nostr.Event) bool) func(*nostr.Event) bool {
	if refers == nil || byKind == nil || !slices.ContainsFunc(fs, byKind) {
		return New(fs, nil).Match
	}
	m := New(fs, byKind)
	return func(ev *nostr.Event) bool {
		plain, byKind := m.MatchSplit(ev)
		return plain || byKind && refers(ev)
	}
}

// matches is nostr.Filter.Matches.
func (m *matchFilter) matches(ev *nostr.Event) bool {
	if m.ids != nil && !m.ids.has(ev.ID) {
		return false
	}
	if m.kindsOn && !slices.Contains(m.kinds, ev.Kind) {
		return false
	}
	if m.authors != nil && !m.authors.has(ev.PubKey) {
		return false
	}
	for _, t := range m.tags {
		if !hasTag(ev.Tags, t.name, t.values) {
			return false
		}
	}
	if m.since != nil && ev.CreatedAt < *m.since {
		return false
	}
	if m.until != nil && ev.CreatedAt > *m.until {
		return false
	}
	return true
}

// hasTag is nostr.Tags.ContainsAny.
func hasTag(tags nostr.Tags, name string, values *valueRuns) bool {
	for _, tag := range tags {
		if len(tag) >= 2 && tag[0] == name && values.has(tag[1]) {
			return true
		}
	}
	return false
}

// valueRuns is a set of strings kept as the lists it was built from: each
// run is a sequence of sorted lists ordered by their first value, each
// list's last value at most the next one's first. Layers23's chunks of
// one tag form one run; a tag named by two layers (q: repositories and
// roots) two. Lists that are not sorted are sorted copies.
type valueRuns struct {
	runs [][][]string
}

// maxValueRuns bounds the runs searched per lookup: past it, the values
// are merged into one sorted copy.
const maxValueRuns = 4

func newValueRuns(lists [][]string) *valueRuns {
	chunks := make([][]string, 0, len(lists))
	for _, l := range lists {
		if len(l) == 0 {
			continue
		}
		if !slices.IsSorted(l) {
			l = slices.Sorted(slices.Values(l))
		}
		chunks = append(chunks, l)
	}
	slices.SortStableFunc(chunks, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	v := &valueRuns{}
	for _, c := range chunks {
		placed := false
		for i, run := range v.runs {
			if last := run[len(run)-1]; last[len(last)-1] <= c[0] {
				v.runs[i] = append(run, c)
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		if len(v.runs) == maxValueRuns {
			var all []string
			for _, c := range chunks {
				all = append(all, c...)
			}
			slices.Sort(all)
			return &valueRuns{runs: [][][]string{{slices.Compact(all)}}}
		}
		v.runs = append(v.runs, [][]string{c})
	}
	return v
}

func (v *valueRuns) has(x string) bool {
	for _, run := range v.runs {
		// The last list whose first value is at most x.
		i := sort.Search(len(run), func(i int) bool { return run[i][0] > x }) - 1
		if i < 0 {
			continue
		}
		if _, ok := slices.BinarySearch(run[i], x); ok {
			return true
		}
	}
	return false
}

// FiltersLabel names a job's filters for the debug log: the tag they
// select by and how many values, or the kinds.
func FiltersLabel(fs []nostr.Filter) string {
	if len(fs) != 1 {
		return fmt.Sprintf("%d filters", len(fs))
	}
	for t, v := range fs[0].Tags {
		return fmt.Sprintf("#%s×%d", t, len(v))
	}
	return fmt.Sprintf("kinds %v", fs[0].Kinds)
}
