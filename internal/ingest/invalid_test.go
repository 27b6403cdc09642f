package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// TestIDStateInvalidAfterDrop: a copy dropped as invalid (too large in
// Handle, a wrong id in process) makes its id IDInvalid, so a fetch
// waiting for it asks its own relay at once; an honest copy afterwards is
// handed on as usual and the id is no longer invalid.
func TestIDStateInvalidAfterDrop(t *testing.T) {
	h, pub, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1000, MaxEventTags: 3}})
	ctx := context.Background()
	real := signed(t, nostr.Event{Kind: 1, CreatedAt: 1, Content: "ok"})
	key, _ := event.DecodeID(real.ID)
	if st := h.IDState(key); st != IDUnseen {
		t.Fatalf("before any copy: state %d, want unseen", st)
	}
	// Oversized copy: dropped in Handle before the queue.
	if err := h.Handle(ctx, Incoming{Event: real, Size: 5000, Relay: "ws://big"}); err != nil {
		t.Fatal(err)
	}
	if st := h.IDState(key); st != IDInvalid {
		t.Fatalf("after a too_large copy: state %d, want invalid", st)
	}
	// A copy with content that does not match its id.
	other := signed(t, nostr.Event{Kind: 1, CreatedAt: 2, Content: "other"})
	okey, _ := event.DecodeID(other.ID)
	bad := *other
	bad.Content = strings.Repeat("y", 10)
	h.process(ctx, Incoming{Event: &bad, Size: 300, Relay: "ws://bad"})
	if st := h.IDState(okey); st != IDInvalid {
		t.Fatalf("after a bad_id copy: state %d, want invalid", st)
	}
	// The honest copies go through.
	h.process(ctx, Incoming{Event: real, Size: 300, Relay: "ws://honest"})
	h.process(ctx, Incoming{Event: other, Size: 300, Relay: "ws://honest"})
	if got := pub.ids(); len(got) != 2 {
		t.Fatalf("published %v, want both honest copies", got)
	}
	for _, k := range [][32]byte{key, okey} {
		if st := h.IDState(k); st == IDInvalid || st == IDUnseen {
			t.Fatalf("after the honest copy: state %d", st)
		}
	}
}

// TestInvalidIDsBounded: the set of ids dropped as invalid keeps at most
// two generations.
func TestInvalidIDsBounded(t *testing.T) {
	var s invalidIDs
	for i := range 3 * invalidIDsGen {
		s.add([32]byte{byte(i), byte(i >> 8), byte(i >> 16)})
	}
	if n := len(s.cur) + len(s.old); n > 2*invalidIDsGen {
		t.Fatalf("%d ids kept", n)
	}
	if s.has([32]byte{0, 0, 0}) {
		t.Fatal("the oldest id is still kept")
	}
	last := 3*invalidIDsGen - 1
	if !s.has([32]byte{byte(last), byte(last >> 8), byte(last >> 16)}) {
		t.Fatal("the newest id is not kept")
	}
}
