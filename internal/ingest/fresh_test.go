package ingest

import (
	"context"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestFresh: an event counts as new for the relay it came from first;
// its copies, from that relay again or from another, and an event the
// own relay holds do not.
func TestFresh(t *testing.T) {
	h, pub, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}})
	ctx := context.Background()
	a := signed(t, nostr.Event{Kind: 1621, CreatedAt: 1700000000, Content: "a"})
	b := signed(t, nostr.Event{Kind: 1621, CreatedAt: 1700000001, Content: "b"})
	own := signed(t, nostr.Event{Kind: 1621, CreatedAt: 1700000002, Content: "own"})
	h.OnOwnRelay(own)
	for _, in := range []Incoming{
		{Event: a, Relay: "ws://one"}, {Event: a, Relay: "ws://one"}, {Event: a, Relay: "ws://two"},
		{Event: b, Relay: "ws://two"}, {Event: own, Relay: "ws://one"},
	} {
		h.process(ctx, in)
	}
	if one, two := h.Fresh("ws://one"), h.Fresh("ws://two"); one != 1 || two != 1 {
		t.Fatalf("new from one %d, from two %d; want 1 each", one, two)
	}
	if n := len(pub.ids()); n != 2 {
		t.Fatalf("published %d events, want 2", n)
	}
}
