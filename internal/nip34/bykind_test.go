package nip34_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// TestLayer3ByKindWithin: fitted to one tag value per filter, the kind
// filters are 4×7 comment filters and the PR-update one; a relay allowing
// fewer filters per REQ gets the comment filter without `#k`, then without
// `#K`, every filter still a kind filter (checked by the matcher).
func TestLayer3ByKindWithin(t *testing.T) {
	one := func(fs []nostr.Filter) []nostr.Filter { return historic.FitTagValues(fs, 1) }
	full := len(nip34.RootKindValues)*len(nip34.ParentKindValues) + 1
	for _, c := range []struct {
		max, want int
		tags      []string // the first filter's tags
	}{
		{0, full, []string{"K", "k"}},
		{full, full, []string{"K", "k"}},
		{full - 1, len(nip34.RootKindValues) + 1, []string{"K"}},
		{len(nip34.RootKindValues), 2, nil},
		{1, 1, nil},
	} {
		fs := nip34.Layer3ByKindWithin(nil, c.max, one)
		if len(fs) != c.want {
			t.Errorf("max %d: %d filters, want %d", c.max, len(fs), c.want)
		}
		if got := slices.Sorted(maps.Keys(fs[0].Tags)); !slices.Equal(got, c.tags) {
			t.Errorf("max %d: first filter's tags %v, want %v", c.max, got, c.tags)
		}
		for _, f := range fs {
			if !nip34.ByKind(f) {
				t.Errorf("max %d: %v is no kind filter", c.max, f)
			}
		}
	}
}
