package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// Events a holder releases come back through the release queue the
// handler reads: each is published and settled like any other (counted,
// told to the stored listeners given at construction), and the holder
// gets the own relay's answer; one refused is an error for the holder.
func TestReleasedEventsPublishedThroughQueue(t *testing.T) {
	pub := &recordingPublish{}
	releases := event.NewReleases()
	var stored []string
	h, err := New(Config{QueueLen: 16, SeenMax: 100, VerifyConfig: VerifyConfig{VerifyWorkers: 1}}, Deps{
		Publisher: pub, Released: releases, Registry: prometheus.NewRegistry(),
		Stored: []func(*nostr.Event){func(ev *nostr.Event) { stored = append(stored, ev.ID) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.RunReleased(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	ev := signed(t, nostr.Event{Kind: 30618, CreatedAt: 1700000000, Tags: nostr.Tags{{"d", "repo"}}})
	if err := releases.Publish(ctx, ev); err != nil {
		t.Fatalf("released event: %v", err)
	}
	if got := pub.ids(); len(got) != 1 || got[0] != ev.ID {
		t.Fatalf("published %v, want the released event", got)
	}
	if n := testkit.Value(t, h.m.eventsSynced); n != 1 {
		t.Fatalf("events synced = %v, want 1", n)
	}
	if len(stored) != 1 || stored[0] != ev.ID {
		t.Fatalf("stored listeners told %v", stored)
	}

	forged := *ev
	forged.Sig = strings.Repeat("1", 128)
	if err := releases.Publish(ctx, &forged); err == nil {
		t.Fatal("a refused release answered nil")
	}
}

// A holder waiting to hand an event on stops when its context ends, even
// when nothing reads the queue.
func TestReleasesPublishStopsWithContext(t *testing.T) {
	releases := event.NewReleases()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := releases.Publish(ctx, &nostr.Event{}); err == nil {
		t.Fatal("Publish without a reader returned nil")
	}
}
