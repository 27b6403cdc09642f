package relay

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
)

// negOpenJSON writes exactly nip77.OpenEnvelope's JSON, in one slice of
// its size, for filters within its pooled buffer and past it.
func TestNegOpenJSONIsTheEnvelopes(t *testing.T) {
	since := nostr.Timestamp(1700000000)
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", i)
	}
	for i, f := range []nostr.Filter{
		{},
		// One tag name a filter: go-nostr writes a filter's tags in map order.
		{Kinds: []int{1617, 1621}, Tags: nostr.TagMap{"e": ids[:100]}, Since: &since, Limit: 500},
		{IDs: ids}, // past the pooled buffer
		{Tags: nostr.TagMap{"d": {`<a>&"b"\ é` + "\x01"}}},
	} {
		msg := "61" + strings.Repeat("00", i*1000)
		want, err := nip77.OpenEnvelope{SubscriptionID: "neg-7", Filter: f, Message: msg}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := negOpenJSON("neg-7", f, msg)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("filter %d: %v\n got %s\nwant %s", i, err, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("filter %d: %d bytes in a slice of %d", i, len(got), cap(got))
		}
	}
}

// BenchmarkNegOpenJSON builds a NEG-OPEN of a Layer 3 filter of 100 ids
// as go-nostr's envelope does and as negOpenJSON does.
//
//	go test -run '^$' -bench NegOpenJSON -benchmem ./internal/relay/
func BenchmarkNegOpenJSON(b *testing.B) {
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", i)
	}
	f := nostr.Filter{Tags: nostr.TagMap{"e": ids}}
	msg := "61" + strings.Repeat("00", 20)
	b.Run("envelope", func(b *testing.B) {
		for b.Loop() {
			if _, err := (nip77.OpenEnvelope{SubscriptionID: "neg-7", Filter: f, Message: msg}).MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("negOpenJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := negOpenJSON("neg-7", f, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
