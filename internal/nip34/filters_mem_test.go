package nip34

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// taggedClonePerTag is tagged as it was before: a copy of each chunk's
// values per tag name.
func taggedClonePerTag(values []string, perFilter int, tags ...string) []nostr.Filter {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	var out []nostr.Filter
	for start := 0; start < len(sorted); start += perFilter {
		chunk := sorted[start:min(start+perFilter, len(sorted))]
		for _, tag := range tags {
			out = append(out, nostr.Filter{Tags: nostr.TagMap{tag: slices.Clone(chunk)}})
		}
	}
	return out
}

// BenchmarkLayer3Bytes reports the heap bytes per root (B/root) that the
// Layer 3 filters of 100,000 roots keep alive beyond the root ids
// themselves, as built now (one value slice per chunk, shared by its e, E
// and q filters) and as before (a copy per tag name), in the same run.
//
//	go test -run '^$' -bench Layer3Bytes -count 3 ./internal/nip34/
func BenchmarkLayer3Bytes(b *testing.B) {
	const n = 100_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	for _, v := range []struct {
		name  string
		build func() []nostr.Filter
	}{
		{"clone-per-tag", func() []nostr.Filter { return taggedClonePerTag(roots, DefaultValuesPerFilter, "e", "E", "q") }},
		{"shared-chunk", func() []nostr.Filter { return Layer3(roots, DefaultValuesPerFilter, nil) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				fs := v.build()
				per = float64(testkit.HeapInUse()-before) / n
				runtime.KeepAlive(fs)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
