package relay

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
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
// EVENT message: split by hand (eventFrame), decoded once (eventDecoder)
// straight from the frame and
// sent as the bytes it arrived in (raw), against decoding and re-encoding
// it (reencode). allocs/op counts every allocation, the decoded event's
// included: the decode is the one place an event is built on this path.
func BenchmarkForward(b *testing.B) {
	frame := benchFrame(b)
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		var d eventDecoder
		for b.Loop() {
			_, obj, ok := eventFrame(frame)
			var ev nostr.Event
			if !ok || !d.decode(obj, &ev) || countKey(obj, `"id"`) != 1 {
				b.Fatal("no raw event")
			}
			raw := bytes.Clone(obj)
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

// BenchmarkHandleEvent is the read loop's work for one EVENT frame, from
// the read buffer to the subscription's queue: "split" is handle (the
// frame split by hand, the event decoded straight from the buffer, the
// raw object copied once); "envelope" is the generic path handle took
// before (the frame copied to a string, go-nostr's envelope decoder, the
// raw object delimited again and copied).
func BenchmarkHandleEvent(b *testing.B) {
	frame := benchFrame(b)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	c := &Conn{url: "ws://bench", log: zap.NewNop(), ctx: ctx, cancel: cancel,
		subs: map[string]*Subscription{}, negs: map[string]chan NegReply{}, oks: map[string]okWaiters{}}
	sub := &Subscription{ID: "h1", conn: c, ch: make(chan SubMsg, 1), done: make(chan struct{})}
	c.subs["h1"] = sub
	for _, v := range []struct {
		name   string
		handle func([]byte)
	}{{"split", c.handle}, {"envelope", c.handleEventSlow}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				v.handle(frame)
				if m := <-sub.ch; m.Raw == nil || m.Event == nil {
					b.Fatal("no event")
				}
			}
		})
	}
}
