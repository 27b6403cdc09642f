package filtermatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// randomFilters draws filters over small alphabets so that events match
// often: nil and empty lists, unsorted lists, several tags, since/until,
// and runs of filters alike but for their one tag's values (merged).
func randomFilters(rng *rand.Rand) []nostr.Filter {
	vals := func(prefix string) []string {
		if rng.IntN(6) == 0 {
			return nil
		}
		n := rng.IntN(14)
		out := make([]string, 0, n)
		for range n {
			out = append(out, fmt.Sprintf("%s%d", prefix, rng.IntN(20)))
		}
		if rng.IntN(2) == 0 {
			slices.Sort(out)
		}
		return out
	}
	ts := func() *nostr.Timestamp {
		if rng.IntN(3) != 0 {
			return nil
		}
		t := nostr.Timestamp(rng.IntN(10))
		return &t
	}
	var fs []nostr.Filter
	for range rng.IntN(8) {
		var f nostr.Filter
		switch rng.IntN(3) {
		case 0: // the shape of nip34's layers: one tag, maybe kinds and since
			if rng.IntN(3) == 0 {
				f.Kinds = []int{rng.IntN(3)}
			}
			f.Since = ts()
			f.Tags = nostr.TagMap{[]string{"e", "E", "q"}[rng.IntN(3)]: vals("v")}
			for range rng.IntN(4) { // more chunks of the same shape
				g := f
				g.Tags = nostr.TagMap{}
				for k := range f.Tags {
					g.Tags[k] = vals("v")
				}
				fs = append(fs, g)
			}
		default:
			f.IDs, f.Authors = vals("i"), vals("p")
			if rng.IntN(2) == 0 {
				f.Kinds = []int{}
				for range rng.IntN(3) {
					f.Kinds = append(f.Kinds, rng.IntN(3))
				}
			}
			f.Since, f.Until = ts(), ts()
			if rng.IntN(3) != 0 {
				f.Tags = nostr.TagMap{}
				for range rng.IntN(3) {
					f.Tags[[]string{"e", "E", "q", "K"}[rng.IntN(4)]] = vals("v")
				}
			}
		}
		fs = append(fs, f)
	}
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	return fs
}

func randomEvent(rng *rand.Rand) *nostr.Event {
	ev := &nostr.Event{
		ID: fmt.Sprintf("i%d", rng.IntN(20)), PubKey: fmt.Sprintf("p%d", rng.IntN(20)),
		Kind: rng.IntN(3), CreatedAt: nostr.Timestamp(rng.IntN(10)),
	}
	for range rng.IntN(5) {
		switch rng.IntN(5) {
		case 0:
			ev.Tags = append(ev.Tags, nostr.Tag{[]string{"e", "E", "q", "K"}[rng.IntN(4)]})
		default:
			ev.Tags = append(ev.Tags, nostr.Tag{[]string{"e", "E", "q", "K", "p"}[rng.IntN(5)], fmt.Sprintf("v%d", rng.IntN(20)), "x"})
		}
	}
	return ev
}

// TestFilterMatcherAgreesWithGoNostr: the compiled filters match exactly
// what nostr.Filters.Match matches, on random filters and events.
func TestFilterMatcherAgreesWithGoNostr(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	for round := 0; round < 3000; round++ {
		fs := randomFilters(rng)
		m := New(fs, nil)
		for range 40 {
			ev := randomEvent(rng)
			if got, want := m.Match(ev), nostr.Filters(fs).Match(ev); got != want {
				t.Fatalf("filters %v\nevent %v\nmatcher %v, go-nostr %v", fs, ev, got, want)
			}
		}
		if m.Match(nil) {
			t.Fatal("nil event matched")
		}
	}
}

// FuzzFilterMatcher is TestFilterMatcherAgreesWithGoNostr with fuzzed seeds.
func FuzzFilterMatcher(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		rng := rand.New(rand.NewPCG(a, b))
		fs := randomFilters(rng)
		m := New(fs, nil)
		for range 20 {
			ev := randomEvent(rng)
			if got, want := m.Match(ev), nostr.Filters(fs).Match(ev); got != want {
				t.Fatalf("filters %v\nevent %v\nmatcher %v, go-nostr %v", fs, ev, got, want)
			}
		}
	})
}

// BenchmarkJobMatch: the check of an arriving event against a historic
// job's filters, Layers23 of 50 repositories and 1,000 roots (100 values a
// filter: 33 filters), for an event tagging a root: go-nostr's scan
// against the compiled matcher.
func BenchmarkJobMatch(b *testing.B) {
	var repos, roots []string
	for i := range 50 {
		repos = append(repos, nip34.RepoRef(fmt.Sprintf("%064x", i), "repo"))
	}
	for i := range 1000 {
		roots = append(roots, fmt.Sprintf("%064x", i*7919))
	}
	fs := nip34.Layers23(repos, roots, 100, nil)
	evs := make([]*nostr.Event, 64)
	for i := range evs {
		evs[i] = &nostr.Event{Kind: 1111, Tags: nostr.Tags{
			{"E", roots[(i*37)%len(roots)]}, {"K", "1617"}, {"P", fmt.Sprintf("%064x", i)}, {"e", fmt.Sprintf("%064x", i+1)}, {"k", "1111"}, {"p", fmt.Sprintf("%064x", i)},
		}}
	}
	run := func(match func(*nostr.Event) bool) func(*testing.B) {
		return func(b *testing.B) {
			i := 0
			for b.Loop() {
				if !match(evs[i%len(evs)]) {
					b.Fatal("no match")
				}
				i++
			}
		}
	}
	b.Run("go-nostr", run(nostr.Filters(fs).Match))
	b.Run("compiled", run(New(fs, nil).Match))
}

// BenchmarkPageMatch: a page of 500 events checked against its REQ's one
// filter (100 roots by `E`): go-nostr's scan against a matcher compiled
// for the page (what Pager.fetchOnce does), per event.
func BenchmarkPageMatch(b *testing.B) {
	var roots []string
	for i := range 100 {
		roots = append(roots, fmt.Sprintf("%064x", i*7919))
	}
	f := nip34.Layer3(roots, 100, nil)[1]
	evs := make([]*nostr.Event, 500)
	for i := range evs {
		evs[i] = &nostr.Event{Kind: 1111, Tags: nostr.Tags{
			{"E", roots[(i*37)%len(roots)]}, {"K", "1617"}, {"P", fmt.Sprintf("%064x", i)}, {"e", fmt.Sprintf("%064x", i+1)}, {"k", "1111"}, {"p", fmt.Sprintf("%064x", i)},
		}}
	}
	b.Run("go-nostr", func(b *testing.B) {
		for b.Loop() {
			for _, ev := range evs {
				if !f.Matches(ev) {
					b.Fatal("no match")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			match := New([]nostr.Filter{f}, nil).Match
			for _, ev := range evs {
				if !match(ev) {
					b.Fatal("no match")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
}

// TestChecked: an event matched only by a filter byKind holds for passes
// when refers does; one matched by another filter passes regardless; with
// no refers (or no such filter) Checked is Match.
func TestChecked(t *testing.T) {
	kinds := nostr.Filter{Kinds: []int{1111}}
	tagged := nostr.Filter{Tags: nostr.TagMap{"a": {"30617:p:r"}}}
	byKind := func(f nostr.Filter) bool { return f.Tags == nil }
	refersTo := func(ev *nostr.Event) bool { return ev.Tags.GetFirst([]string{"E", "root"}) != nil }
	fs := []nostr.Filter{kinds, tagged}
	check := Checked(fs, byKind, refersTo)
	for _, c := range []struct {
		ev   *nostr.Event
		want bool
	}{
		{&nostr.Event{Kind: 1111}, false},
		{&nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "root"}}}, true},
		{&nostr.Event{Kind: 1, Tags: nostr.Tags{{"a", "30617:p:r"}}}, true},
		{&nostr.Event{Kind: 1, Tags: nostr.Tags{{"E", "root"}}}, false},
	} {
		if got := check(c.ev); got != c.want {
			t.Errorf("Checked(%v) = %v, want %v", c.ev, got, c.want)
		}
	}
	if !Checked(fs, byKind, nil)(&nostr.Event{Kind: 1111}) || !Checked(fs, nil, refersTo)(&nostr.Event{Kind: 1111}) {
		t.Error("without refers or byKind, Checked is not Match")
	}
}
