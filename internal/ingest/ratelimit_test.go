package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
)

func TestRelayLimitsReserve(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "h"})
	l := newRelayLimits(10, 2, 0, clk, hits, nil)
	for i, want := range []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if got := l.reserve("ws://a"); got != want {
			t.Fatalf("reserve #%d = %s, want %s", i, got, want)
		}
	}
	// Another relay has its own bucket.
	if got := l.reserve("ws://b"); got != 0 {
		t.Fatalf("second relay waits %s", got)
	}
	clk.Advance(time.Second) // refills to the burst, no more
	for i, want := range []time.Duration{0, 0, 100 * time.Millisecond} {
		if got := l.reserve("ws://a"); got != want {
			t.Fatalf("after refill, reserve #%d = %s, want %s", i, got, want)
		}
	}
	if got := newRelayLimits(0, 0, 0, nil, nil, nil).reserve("x"); got != 0 {
		t.Fatalf("unlimited reserve = %s", got)
	}
}

func TestRelayLimitsSweep(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := newRelayLimits(10, 1, 4, clk, nil, nil)
	for i := 0; i < sweepAt+10; i++ {
		l.reserve(string(rune('a'+i%26)) + time.Duration(i).String())
		clk.Advance(time.Second)
	}
	if n := len(l.relays); n > sweepAt {
		t.Fatalf("%d relays remembered, bound %d", n, sweepAt)
	}
}

// One relay over its queue bound waits in Handle; another relay is not
// held up by it.
func TestHandlerRelayQueueIsolatesRelays(t *testing.T) {
	h, _, _ := newTestHandler(t, Config{QueueLen: 8, RelayLimits: RelayLimits{RelayQueue: 3}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &nostr.Event{}
	for i := 0; i < 3; i++ {
		if err := h.Handle(ctx, Incoming{Event: ev, Relay: "ws://flood"}); err != nil {
			t.Fatal(err)
		}
	}
	blocked := make(chan error, 1)
	go func() { blocked <- h.Handle(ctx, Incoming{Event: ev, Relay: "ws://flood"}) }()
	for i := 0; i < 3; i++ {
		tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
		err := h.Handle(tctx, Incoming{Event: ev, Relay: "ws://honest"})
		tcancel()
		if err != nil {
			t.Fatalf("honest relay blocked behind the flooding one: %v", err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("flooding relay's 4th event was queued (err %v)", err)
	default:
	}
	deadline := time.Now().Add(10 * time.Second)
	for testkit.Value(t, h.m.limitHits.WithLabelValues("relay_queue")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("relay_queue hit not counted")
		}
		time.Sleep(time.Millisecond)
	}
	// Processing one of the flood's events frees its slot.
	h.processQueued(ctx, <-h.in)
	select {
	case err := <-blocked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slot not released after processing")
	}
	cancel()
	if err := h.Handle(ctx, Incoming{Event: ev, Relay: "ws://flood"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Handle after cancel = %v", err)
	}
}

func TestHandlerRelayRateCountsHits(t *testing.T) {
	h, _, _ := newTestHandler(t, Config{QueueLen: 100})
	clk := clock.NewManual(time.Unix(1000, 0))
	h.limits = newRelayLimits(1000, 2, 0, clk,
		h.m.limitHits.WithLabelValues("relay_event_rate"), nil)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		done := make(chan error, 1)
		go func() { done <- h.Handle(ctx, Incoming{Event: &nostr.Event{}, Relay: "ws://a"}) }()
		// Over the burst, Handle waits on the clock for the next token.
		for waited := false; ; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if wantWait := i >= 2; waited != wantWait {
					t.Fatalf("event %d waited on the clock: %v, want %v", i, waited, wantWait)
				}
			case <-time.After(time.Millisecond):
				if clk.Waiters() > 0 {
					waited = true
					clk.Advance(time.Millisecond)
				}
				continue
			}
			break
		}
	}
	if got := testkit.Value(t, h.m.limitHits.WithLabelValues("relay_event_rate")); got != 2 {
		t.Fatalf("relay_event_rate hits = %v, want 2", got)
	}
}

func BenchmarkRelayLimitsAdmit(b *testing.B) {
	l := newRelayLimits(1<<30, 1<<30, 1<<20, nil, nil, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, err := l.admit(ctx, "ws://relay.example.com", 100, true)
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkHandlerDropsForgery: the cost of refusing a forged event (a
// real event's id and signature with other content).
func BenchmarkHandlerDropsForgery(b *testing.B) {
	h, pub, _ := newTestHandler(b, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}})
	real := signed(b, nostr.Event{Kind: 1621, CreatedAt: 1700000000, Content: "issue", Tags: nostr.Tags{{"a", "30617:x:y"}}})
	forged := *real
	forged.Content = "forged"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.process(ctx, Incoming{Event: &forged, Size: 400})
	}
	if len(pub.ids()) != 0 {
		b.Fatal("forgery published")
	}
}

// Events over a bound are dropped in Handle: they never take a queue slot
// or a rate token.
func TestHandleDropsOversizedBeforeQueueing(t *testing.T) {
	h, _, _ := newTestHandler(t, Config{QueueLen: 1, RelayLimits: RelayLimits{RelayQueue: 1}, EventLimits: EventLimits{MaxEventBytes: 100, MaxEventTags: 2}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := &nostr.Event{Content: "x"}
	tags := &nostr.Event{Tags: nostr.Tags{{"t"}, {"t"}, {"t"}}}
	for i := 0; i < 10; i++ {
		if err := h.Handle(ctx, Incoming{Event: big, Size: 1000, Relay: "ws://a"}); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(ctx, Incoming{Event: tags, Size: 50, Relay: "ws://a"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.in); n != 0 {
		t.Fatalf("%d oversized events queued", n)
	}
	if got := testkit.Value(t, h.m.eventsInvalid.WithLabelValues("too_large")); got != 10 {
		t.Fatalf("too_large = %v", got)
	}
	if got := testkit.Value(t, h.m.eventsInvalid.WithLabelValues("too_many_tags")); got != 10 {
		t.Fatalf("too_many_tags = %v", got)
	}
}

// TestRelayLimitsBytes: a relay may have at most maxBytes of events in the
// shared queue; one event is always let in; the others wait until bytes are
// released, and give up with the context.
func TestRelayLimitsBytes(t *testing.T) {
	l := newRelayLimits(0, 0, 0, nil, nil, nil)
	l.maxBytes = 1000
	ctx := context.Background()
	const relay = "ws://relay.example.com"
	big, err := l.admit(ctx, relay, 5000, true) // larger than the bound, but the queue is empty
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.admit(short, relay, 10, true); err == nil {
		t.Fatal("admitted past the byte bound")
	}
	other, err := l.admit(ctx, "ws://other.example.com", 900, true) // other relays are not affected
	if err != nil {
		t.Fatal(err)
	}
	other()
	done := make(chan func())
	go func() {
		r, err := l.admit(ctx, relay, 600, true)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case <-done:
		t.Fatal("admitted while the big event is queued")
	case <-time.After(50 * time.Millisecond):
	}
	big()
	r600 := <-done
	r400, err := l.admit(ctx, relay, 400, true) // 600 + 400 fits exactly
	if err != nil {
		t.Fatal(err)
	}
	r600()
	r400()
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.relays[relay].bytes; b != 0 {
		t.Fatalf("%d bytes still counted after every release", b)
	}
}

// TestHandlerRelayRatePacesOnlySeen: events new to the handler pass at
// once however many a relay hands over (the sync asked for them); copies
// of events it has seen take a rate token each and wait on the clock past
// the burst.
func TestHandlerRelayRatePacesOnlySeen(t *testing.T) {
	h, _, _ := newTestHandler(t, Config{QueueLen: 100})
	clk := clock.NewManual(time.Unix(1000, 0))
	h.limits = newRelayLimits(1, 2, 0, clk, h.m.limitHits.WithLabelValues("relay_event_rate"), nil)
	ctx := context.Background()
	evs := make([]*nostr.Event, 20)
	for i := range evs {
		evs[i] = signed(t, nostr.Event{Kind: 1621, CreatedAt: nostr.Timestamp(1700000000 + i), Content: "issue"})
		// A new event that waited on the clock would wait until the timeout.
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := h.Handle(short, Incoming{Event: evs[i], Relay: "ws://a"})
		cancel()
		if err != nil {
			t.Fatalf("new event %d: %v", i, err)
		}
	}
	if got := testkit.Value(t, h.m.limitHits.WithLabelValues("relay_event_rate")); got != 0 {
		t.Fatalf("relay_event_rate hits for 20 new events = %v, want 0", got)
	}
	for _, ev := range evs {
		h.MarkPresent(ev)
	}
	waited := 0
	for _, ev := range evs[:4] {
		done := make(chan error, 1)
		go func() { done <- h.Handle(ctx, Incoming{Event: ev, Relay: "ws://a"}) }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Millisecond):
				if clk.Waiters() > 0 {
					waited++
					clk.Advance(time.Second)
				}
				continue
			}
			break
		}
	}
	if waited != 2 {
		t.Fatalf("copies of seen events waited on the clock %d times, want 2 (burst 2, 4 copies)", waited)
	}
	if got := testkit.Value(t, h.m.limitHits.WithLabelValues("relay_event_rate")); got != 2 {
		t.Fatalf("relay_event_rate hits = %v, want 2", got)
	}
}
