package nip34

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func refs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("30617:%064d:repo%03d", i, i)
	}
	return out
}

func TestLayer1(t *testing.T) {
	ts := nostr.Timestamp(1000)
	tests := []struct {
		name  string
		since *nostr.Timestamp
		want  nostr.Filter
	}{
		{"no since", nil, nostr.Filter{Kinds: []int{30617, 30618}}},
		{"since", &ts, nostr.Filter{Kinds: []int{30617, 30618}, Since: &ts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Layer1(tt.since); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	// The filter does not alias the caller's timestamp.
	f := Layer1(&ts)
	ts = 5
	if *f.Since != 1000 {
		t.Fatal("Layer1 aliases since")
	}
}

func TestLayer2And3Chunking(t *testing.T) {
	ts := nostr.Timestamp(42)
	tests := []struct {
		name      string
		n         int
		perFilter int
		wantLen   int
		wantSizes []int // values per filter, per tag group
	}{
		{"empty", 0, 100, 0, nil},
		{"one", 1, 100, 3, []int{1, 1, 1}},
		{"exactly 100", 100, 100, 3, []int{100, 100, 100}},
		{"101 splits", 101, 100, 6, []int{100, 100, 100, 1, 1, 1}},
		{"250 by 100", 250, 100, 9, []int{100, 100, 100, 100, 100, 100, 50, 50, 50}},
		{"zero perFilter uses default", 150, 0, 6, []int{100, 100, 100, 50, 50, 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l2 := Layer2(refs(tt.n), tt.perFilter, &ts)
			if len(l2) != tt.wantLen || Count23(tt.n, 0, tt.perFilter) != tt.wantLen {
				t.Fatalf("got %d filters (Count23 %d), want %d", len(l2), Count23(tt.n, 0, tt.perFilter), tt.wantLen)
			}
			seen := map[string]int{}
			for i, f := range l2 {
				if len(f.Tags) != 1 {
					t.Fatalf("filter %d has %d tags", i, len(f.Tags))
				}
				for tag, vals := range f.Tags {
					if len(vals) != tt.wantSizes[i] {
						t.Fatalf("filter %d: %d values, want %d", i, len(vals), tt.wantSizes[i])
					}
					for _, v := range vals {
						seen[tag+v]++
					}
					wantTag := []string{"a", "A", "q"}[i%3]
					if tag != wantTag {
						t.Fatalf("filter %d tag %q, want %q", i, tag, wantTag)
					}
				}
				if f.Since == nil || *f.Since != 42 {
					t.Fatalf("filter %d since %v", i, f.Since)
				}
			}
			if len(seen) != 3*tt.n {
				t.Fatalf("covered %d tag values, want %d", len(seen), 3*tt.n)
			}
		})
	}
}

func TestLayer3Tags(t *testing.T) {
	ids := []string{"bb", "aa", "aa"}
	got := Layer3(ids, 100, nil)
	want := []nostr.Filter{
		{Tags: nostr.TagMap{"e": {"aa", "bb"}}},
		{Tags: nostr.TagMap{"E": {"aa", "bb"}}},
		{Tags: nostr.TagMap{"q": {"aa", "bb"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v (sorted, deduplicated)", got, want)
	}
	if ids[0] != "bb" {
		t.Fatal("Layer3 reordered the caller's slice")
	}
}

func TestLiveAndWithSince(t *testing.T) {
	ts := nostr.Timestamp(7)
	fs := Layers23([]string{"r"}, []string{"e1"}, 100, &ts)
	live := Live(fs)
	for _, f := range live {
		if f.Since != nil || !f.LimitZero || f.Limit != 0 {
			t.Fatalf("live filter %v", f)
		}
	}
	if fs[0].Since == nil {
		t.Fatal("Live modified its input")
	}
	again := WithSince(live, &ts)
	if *again[5].Since != 7 {
		t.Fatal("WithSince did not set since")
	}
	if live[0].Since != nil {
		t.Fatal("WithSince modified its input")
	}
}

func BenchmarkLayers23(b *testing.B) {
	repos, roots := refs(10000), refs(20000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Layers23(repos, roots, 100, nil)
	}
}

func TestLayer3Live(t *testing.T) {
	roots := []string{"bb", "aa"}
	fs := Layer3Live(roots, 100, nil)
	// e and q per chunk of roots, then the two kind filters: no E.
	if len(fs) != 4 {
		t.Fatalf("filters = %d, want 4: %v", len(fs), fs)
	}
	for _, f := range fs[:2] {
		if ByKind(f) || len(f.Tags["E"]) > 0 {
			t.Fatalf("per-root filter %v", f)
		}
	}
	for _, f := range fs[2:] {
		if !ByKind(f) {
			t.Fatalf("kind filter %v not ByKind", f)
		}
	}
	if ByKind(Layer1(nil)) || ByKind(nostr.Filter{Kinds: []int{KindComment, 1}}) {
		t.Fatal("Layer 1 or a filter of other kinds taken as a kind filter of Layer 3")
	}
	if ByKind(Layer2(refs(1), 100, nil)[0]) || Layer3Live(nil, 100, nil) != nil {
		t.Fatal("Layer 2 filter taken as a kind filter, or Layer 3 of no roots not empty")
	}
	comment := &nostr.Event{Kind: KindComment, Tags: nostr.Tags{{"E", "aa"}, {"K", "1621"}, {"e", "cc"}, {"k", "1111"}}}
	foreign := &nostr.Event{Kind: KindComment, Tags: nostr.Tags{{"E", "ff"}, {"K", "1621"}, {"k", "1111"}}}
	if !fs[2].Matches(comment) || !fs[2].Matches(foreign) {
		t.Fatal("#K filter does not match replies to comments on roots")
	}
	// A top-level comment is its root's #e filter's: the kind filter
	// would bring it a second time.
	top := &nostr.Event{Kind: KindComment, Tags: nostr.Tags{{"E", "aa"}, {"K", "1621"}, {"e", "aa"}, {"k", "1621"}}}
	if fs[2].Matches(top) || !fs[0].Matches(top) {
		t.Fatal("a top-level comment is matched by the kind filter, or not by its root's #e filter")
	}
	// A comment on a later patch of a series, a PR update or a status
	// names the root only under E: the kind filter's.
	for _, k := range []string{"1617", "1619", "1631"} {
		onPart := &nostr.Event{Kind: KindComment, Tags: nostr.Tags{{"E", "aa"}, {"K", "1617"}, {"e", "dd"}, {"k", k}}}
		if !fs[2].Matches(onPart) {
			t.Fatalf("a comment on a kind %s event under a root is not matched by the kind filter", k)
		}
	}
	known := func(v string) bool { return v == "aa" || v == "30617:p:d" }
	if !RefersTo(comment, known, known) || RefersTo(foreign, known, known) {
		t.Fatal("RefersTo: known root not found or foreign root accepted")
	}
	byRepo := &nostr.Event{Kind: KindPRUpdate, Tags: nostr.Tags{{"a", "30617:p:d"}}}
	if !RefersTo(byRepo, known, func(string) bool { return false }) {
		t.Fatal("RefersTo: hosted repository not found")
	}
}
