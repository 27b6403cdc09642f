package relay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// benchFrame is an EVENT frame as a remote relay sends it: a patch with a
// 2 kB diff.
func benchFrame(b *testing.B) []byte {
	ev := nostr.Event{Kind: 1617, CreatedAt: 1700000000, Content: strings.Repeat("+ line of a diff\n", 120),
		Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}, {"r", strings.Repeat("c", 40)}, {"t", "root"}}}
	if err := ev.Sign(strings.Repeat("1", 64)); err != nil {
		b.Fatal(err)
	}
	sub := "h1"
	msg, err := nostr.EventEnvelope{SubscriptionID: &sub, Event: ev}.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return msg
}

// The forwarding path from a remote relay's EVENT frame to the own relay's
// EVENT message: decoded once (id, routing fields, the id hash check) and
// sent as the bytes it arrived in (raw), against decoding and re-encoding
// it (reencode). allocs/op counts every allocation, the decoded event's
// included: the decode is the one place an event is built on this path.
func BenchmarkForward(b *testing.B) {
	frame := benchFrame(b)
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			var env nostr.EventEnvelope
			if err := env.FromJSON(string(frame)); err != nil {
				b.Fatal(err)
			}
			raw := bytes.Clone(eventJSON(frame, *env.SubscriptionID))
			if raw == nil {
				b.Fatal("no raw event")
			}
			msg := make([]byte, 0, len(raw)+10)
			msg = append(append(append(msg, `["EVENT",`...), raw...), ']')
			_ = msg
		}
	})
	b.Run("reencode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			var env nostr.EventEnvelope
			if err := env.FromJSON(string(frame)); err != nil {
				b.Fatal(err)
			}
			msg, err := nostr.EventEnvelope{Event: env.Event}.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			_ = msg
		}
	})
}
