package truncation

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestSplitTieNarrows: every part SplitTie returns is narrower than the
// filter it split, so splitting again ends; what no part covers is said.
func TestSplitTieNarrows(t *testing.T) {
	ts := nostr.Timestamp(100)
	values := make([]string, 20)
	for i := range values {
		values[i] = fmt.Sprintf("30617:%064d:r%d", i, i)
	}
	known := []*nostr.Event{{PubKey: "b"}, {PubKey: "a"}, {PubKey: "b"}}
	for _, tc := range []struct {
		name      string
		f         nostr.Filter
		parts     int
		lossy     bool
		narrowest bool
	}{
		{"tag values", nostr.Filter{Tags: nostr.TagMap{"a": values}}, 8, false, false},
		{"kinds", nostr.Filter{Kinds: []int{30617, 30618}}, 2, false, false},
		{"no kinds", nostr.Filter{Tags: nostr.TagMap{"a": values[:1]}}, len(splitKinds), true, false},
		{"authors", nostr.Filter{Kinds: []int{1}, Authors: []string{"a", "b", "c"}}, 3, false, false},
		{"authors seen", nostr.Filter{Kinds: []int{1}}, 2, true, false},
		{"one of each", nostr.Filter{Kinds: []int{1}, Authors: []string{"a"}, Tags: nostr.TagMap{"a": values[:1]}}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Since, tc.f.Until = &ts, &ts
			parts, lossy := SplitTie(tc.f, known)
			if len(parts) != tc.parts || (lossy != "") != tc.lossy {
				t.Fatalf("%d parts, lossy %q; want %d parts, lossy %v", len(parts), lossy, tc.parts, tc.lossy)
			}
			for _, p := range parts {
				if len(p.Kinds) == len(tc.f.Kinds) && len(p.Authors) == len(tc.f.Authors) && len(p.Tags["a"]) == len(tc.f.Tags["a"]) && len(tc.f.Kinds) != 0 && len(tc.f.Authors) != 0 {
					t.Fatalf("part %v is not narrower than %v", p, tc.f)
				}
				if *p.Since != ts || *p.Until != ts {
					t.Fatalf("part %v left the second", p)
				}
			}
		})
	}
}
