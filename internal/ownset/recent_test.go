package ownset

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

func fillTestSet(t testing.TB) *OwnLocalSet {
	idx, err := localindex.New(localindex.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return NewOwnLocalSet(idx, nil, 100, 500, 0, nil, zap.NewNop())
}

// TestFillRecentSlices: a chunk's #e, #E and #q filters share one value
// slice; once it is found filled, the others are not looked up again —
// but a copy, a shorter slice of it, a slice with a value not filled, and
// everything after a Reset still are.
func TestFillRecentSlices(t *testing.T) {
	o := fillTestSet(t)
	var roots []string
	for i := range 100 {
		roots = append(roots, fmt.Sprintf("%064x", i))
	}
	fs := nip34.Layer3(roots, 100, nil) // #e, #E, #q sharing one slice
	keys, fill := o.missingLocked(fs[0])
	if len(keys) != 100 || len(fill) != 3 {
		t.Fatalf("first fill: %d keys, %d filters", len(keys), len(fill))
	}
	for _, k := range keys {
		o.filled.add(k)
	}
	o.remember(fs[0].Tags["e"])
	for _, f := range fs[1:] {
		if keys, fill := o.missingLocked(f); keys != nil || fill != nil {
			t.Fatalf("%v: filled values asked again", f.Tags)
		}
	}
	if !o.recentlyFilled(fs[1].Tags["E"]) || o.recentlyFilled(slices.Clone(roots)) || o.recentlyFilled(roots[:50]) {
		t.Fatal("recentlyFilled does not tell the shared slice from a copy or a part")
	}
	// A copy is looked up value by value: one new value is filled.
	more := append(slices.Clone(roots[1:]), fmt.Sprintf("%064x", 1000))
	if keys, _ := o.missingLocked(nostr.Filter{Tags: nostr.TagMap{"E": more}}); len(keys) != 1 {
		t.Fatalf("copy with one new value: %d keys", len(keys))
	}
	o.Reset()
	if keys, _ := o.missingLocked(fs[1]); len(keys) != 100 {
		t.Fatalf("after Reset: %d keys, want all", len(keys))
	}
}

// BenchmarkFillCheck: the fill check of a chunk's three Layer 3 filters
// (100 roots, all filled) per reconciliation: shared is nip34's filters
// (one value slice), copies three filters with their own copies of the
// values (every value looked up each time, as before the recent lists).
func BenchmarkFillCheck(b *testing.B) {
	o := fillTestSet(b)
	var roots []string
	for i := range 100 {
		roots = append(roots, fmt.Sprintf("%064x", i))
		o.filled.add(roots[i])
	}
	for i := range 50_000 {
		o.filled.add(fmt.Sprintf("%064x", 1000+i))
	}
	shared := nip34.Layer3(roots, 100, nil)
	var copies []nostr.Filter
	for _, f := range shared {
		for tag, vs := range f.Tags {
			copies = append(copies, nostr.Filter{Tags: nostr.TagMap{tag: slices.Clone(vs)}})
		}
	}
	run := func(fs []nostr.Filter) func(*testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				o.recent = [4][]string{} // a new chunk each round
				for _, f := range fs {
					if keys, _ := o.missingLocked(f); keys != nil {
						b.Fatal("unfilled")
					}
				}
			}
		}
	}
	b.Run("copies", run(copies))
	b.Run("shared", run(shared))
}
