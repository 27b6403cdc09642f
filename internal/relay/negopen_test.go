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
// its size, for plain filters and for strings that need escaping.
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
		{IDs: ids},
		{Tags: nostr.TagMap{"d": {`<a>&"b"\ é` + "\x01"}}},
		{Authors: []string{"\x7f", "\u2028", "\xff\xfe", "\t\r\n"}, Search: "a \"b\"", Until: &since, LimitZero: true},
		{Kinds: []int{0, -1, 1 << 30}, Limit: -3},
	} {
		msg := "61" + strings.Repeat("00", i*1000)
		want, err := nip77.OpenEnvelope{SubscriptionID: "neg-7", Filter: f, Message: msg}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got := negOpenJSON("neg-7", f, msg)
		if !bytes.Equal(got, want) {
			t.Fatalf("filter %d:\n got %s\nwant %s", i, got, want)
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
			_ = negOpenJSON("neg-7", f, msg)
		}
	})
}

// reqJSON writes exactly nostr.ReqEnvelope's JSON, in one slice of its
// size.
func TestReqJSONIsTheEnvelopes(t *testing.T) {
	since := nostr.Timestamp(1700000000)
	for i, fs := range []nostr.Filters{
		nil,
		{{}},
		{{Kinds: []int{30617}}, {IDs: []string{fmt.Sprintf("%064x", 1)}, Limit: 1}, {Tags: nostr.TagMap{"a": {"30617:ab:repo é"}}, Since: &since}},
	} {
		want, err := nostr.ReqEnvelope{SubscriptionID: "l7", Filters: fs}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got := reqJSON("l7", fs)
		if !bytes.Equal(got, want) {
			t.Fatalf("filters %d:\n got %s\nwant %s", i, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("filters %d: %d bytes in a slice of %d", i, len(got), cap(got))
		}
	}
}

// plainJSONString agrees with the byte table for every byte in every
// place of a word and of the tail.
func TestPlainJSONString(t *testing.T) {
	base := []byte(strings.Repeat("a", 19))
	for c := 0; c < 256; c++ {
		for at := range base {
			s := bytes.Clone(base)
			s[at] = byte(c)
			if got := plainJSONString(string(s)); got != plainJSON[c] {
				t.Fatalf("byte %#x at %d: plain %v, want %v", c, at, got, plainJSON[c])
			}
		}
	}
}
