package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// A rejected event queued for another publish is neither on the own relay
// nor in the RejectedIndex: Pending counts it until it is routed, so the
// state store does not take the sidecar for idle (and save relay states
// that claim it) while the retry waits.
func TestPendingCountsQueuedRetries(t *testing.T) {
	h, pub, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}, VerifyConfig: VerifyConfig{VerifyWorkers: 1}})
	ev := signed(t, nostr.Event{Kind: 1, CreatedAt: 1700000000, Content: "reply"})
	if !h.retry(idOf(ev), ev) {
		t.Fatal("retry queue refused the event")
	}
	if got := h.Pending(); got != 1 {
		t.Fatalf("Pending = %d with one retry queued, want 1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testkit.WaitFor(t, 10*time.Second, "the retry routed", func() bool {
		return h.Pending() == 0 && len(pub.ids()) == 1
	})
}

// A retry the full queue cannot take is forgotten (fetched again by the
// next sync) and does not stay counted.
func TestPendingForgetsRefusedRetry(t *testing.T) {
	h, _, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}, QueueLen: 1})
	a := signed(t, nostr.Event{Kind: 1, CreatedAt: 1700000000, Content: "a"})
	b := signed(t, nostr.Event{Kind: 1, CreatedAt: 1700000001, Content: "b"})
	if !h.retry(idOf(a), a) {
		t.Fatal("first retry refused")
	}
	if h.retry(idOf(b), b) {
		t.Fatal("second retry taken by a queue of one")
	}
	if got := h.Pending(); got != 1 {
		t.Fatalf("Pending = %d, want 1", got)
	}
}

// idOf is ev's decoded id.
func idOf(ev *nostr.Event) event.ID {
	id, _ := event.IDOf(ev)
	return id
}
