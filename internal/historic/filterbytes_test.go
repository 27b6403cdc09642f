package historic

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// FilterBytes measures exactly what Filter.MarshalJSON writes, escapes
// and all, and a comma, for small filters and large ones.
func TestFilterBytesIsTheJSONSize(t *testing.T) {
	since, until := nostr.Timestamp(1700000000), nostr.Timestamp(1800000000)
	roots := make([]string, 300)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	fs := []nostr.Filter{
		{},
		{Kinds: []int{1, 30617}, Limit: 500, Since: &since, Until: &until},
		{IDs: roots[:5], Authors: roots[5:9], LimitZero: true},
		{Tags: nostr.TagMap{"d": {`<script>&"quote"\ \u2028 é` + "\x01\n"}}, Search: "a<b>&c"},
		{IDs: roots},
		{Authors: []string{"\x7f", "\xff\xfe", "\t"}, Kinds: []int{0, -1, 1 << 30}, Limit: -3},
		{IDs: roots[:1]},
	}
	fs = append(fs, nip34.Layer3(roots, 100, &since)...)
	for i, f := range fs {
		b, err := f.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := FilterBytes(f); got != len(b)+1 {
			t.Errorf("filter %d: FilterBytes %d, its JSON %d bytes and a comma", i, got, len(b))
		}
	}
}

// BenchmarkFilterBytes measures a Layer 3 filter of 100 roots, as every
// REQ and NEG-OPEN does before it is sent: by building its JSON (as it
// was) and by counting it (as it is).
//
//	go test -run '^$' -bench FilterBytes -benchmem ./internal/reposync/
func BenchmarkFilterBytes(b *testing.B) {
	roots := make([]string, 100)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	f := nip34.Layer3(roots, 100, nil)[0]
	b.Run("built", func(b *testing.B) {
		for b.Loop() {
			if j, err := f.MarshalJSON(); err != nil || len(j) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("counted", func(b *testing.B) {
		for b.Loop() {
			if FilterBytes(f) == 0 {
				b.Fatal("empty")
			}
		}
	})
}
