package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/publish"
)

// newIndexedHandler builds a handler over a recordingPublish whose Present
// table is a LocalIndex of at most maxEvents events.
func newIndexedHandler(t testing.TB, maxEvents int) (*Handler, *recordingPublish, *localindex.Index) {
	t.Helper()
	opt := localindex.DefaultOptions()
	opt.MaxEvents = maxEvents
	idx, err := localindex.New(opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{QueueLen: 4096, SeenMax: DefaultSeenMax, EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}}
	cfg.Rejected = RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}
	pub := &recordingPublish{}
	h, err := New(cfg, Deps{Publisher: pub, Present: idx, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return h, pub, idx
}

func issueEvent(t testing.TB, i int) *nostr.Event {
	return signed(t, nostr.Event{Kind: 1621, CreatedAt: nostr.Timestamp(1700000000 + i), Content: fmt.Sprintf("issue %d", i),
		Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}}})
}

// Once the own relay has an event and the LocalIndex holds it, the dedupe
// set keeps no mark of its own for it, and every later copy is still
// dropped: the index answers for it.
func TestDedupeAsksLocalIndexInsteadOfMarking(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 1000)
	ctx := context.Background()
	ev := issueEvent(t, 0)
	h.process(ctx, Incoming{Event: ev, Relay: "ws://a"})
	if got := pub.ids(); len(got) != 1 || got[0] != ev.ID {
		t.Fatalf("published %v", got)
	}
	if !idx.Has(ev.ID) {
		t.Fatal("accepted event not indexed")
	}
	if n := h.seen.Len(); n != 0 {
		t.Fatalf("dedupe set keeps %d marks for an indexed event", n)
	}
	id, _ := event.DecodeID(ev.ID)
	if !h.Seen(ev.ID) || h.IDState(id) != IDSettled {
		t.Fatal("indexed event not seen")
	}
	for _, relay := range []string{"ws://b", "ws://c"} {
		h.process(ctx, Incoming{Event: ev, Relay: relay})
	}
	if n := len(pub.sent); n != 1 {
		t.Fatalf("published %d times", n)
	}
	// Seen on the own relay through the self-subscription: ours, and
	// still no mark.
	h.OnOwnRelay(ev)
	if n := h.seen.Len(); n != 0 {
		t.Fatalf("%d marks after the self-subscription", n)
	}
	// The own relay turned out to lack it: it may be published again.
	idx.Remove(ev.ID)
	h.ForgetPresent(ev.ID)
	h.process(ctx, Incoming{Event: ev, Relay: "ws://d"})
	if n := len(pub.sent); n != 2 {
		t.Fatalf("published %d times after the own relay lost it, want 2", n)
	}
}

// An event others put on the own relay is indexed, not marked, and is not
// taken for one of ours.
func TestOnOwnRelayIndexesWithoutMark(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 1000)
	ev := issueEvent(t, 1)
	h.OnOwnRelay(ev)
	if !idx.Has(ev.ID) || h.seen.Len() != 0 || !h.Seen(ev.ID) {
		t.Fatalf("indexed %v, marks %d, seen %v", idx.Has(ev.ID), h.seen.Len(), h.Seen(ev.ID))
	}
	h.process(context.Background(), Incoming{Event: ev, Relay: "ws://a"})
	if n := len(pub.sent); n != 0 {
		t.Fatalf("event on the own relay published %d times", n)
	}
	// Marking an indexed id adds nothing: the index answers for it.
	h.MarkPresent(ev)
	if n := h.seen.Len(); n != 0 {
		t.Fatalf("%d marks for an indexed id", n)
	}
}

// A full LocalIndex refuses the event: its mark stays, so it is not
// published again.
func TestDedupeKeepsMarkWhenIndexFull(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 1)
	ctx := context.Background()
	a, b := issueEvent(t, 2), issueEvent(t, 3)
	h.process(ctx, Incoming{Event: a, Relay: "ws://a"})
	h.process(ctx, Incoming{Event: b, Relay: "ws://a"})
	if idx.Len() != 1 || idx.Has(b.ID) {
		t.Fatal("index not full as expected")
	}
	if n := h.seen.Len(); n != 1 {
		t.Fatalf("%d marks, want 1 (the event the full index refused)", n)
	}
	h.process(ctx, Incoming{Event: b, Relay: "ws://b"})
	h.OnOwnRelay(b)
	h.process(ctx, Incoming{Event: b, Relay: "ws://c"})
	if n := len(pub.sent); n != 2 {
		t.Fatalf("published %d times, want 2", n)
	}
}

// With the LocalIndex as the dedupe table, a forged copy arriving first is
// still sent, refused as invalid:, forgotten, and the real event arriving
// afterwards published and indexed.
func TestForgedCopyFirstWithLocalIndex(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 1000)
	ctx := context.Background()
	real := issueEvent(t, 4)
	forged := *real
	forged.Sig = strings.Repeat("1", 128)
	h.process(ctx, Incoming{Event: &forged, Relay: "ws://hostile"})
	if len(pub.sent) != 1 || len(pub.got) != 0 || h.Seen(real.ID) || idx.Has(real.ID) {
		t.Fatalf("forged copy: sent %d, stored %d, seen %v, indexed %v", len(pub.sent), len(pub.got), h.Seen(real.ID), idx.Has(real.ID))
	}
	h.process(ctx, Incoming{Event: real, Relay: "ws://honest"})
	if got := pub.ids(); len(got) != 1 || got[0] != real.ID || pub.got[0].Sig != real.Sig {
		t.Fatalf("stored %v, want the real event", got)
	}
	if !idx.Has(real.ID) || h.seen.Len() != 0 {
		t.Fatalf("indexed %v, marks %d", idx.Has(real.ID), h.seen.Len())
	}
}

// Copies of the same events racing through the workers while earlier
// copies settle (index add, then the mark dropped): each event is
// published exactly once.
func TestDedupeWithLocalIndexUnderRace(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 10_000)
	ctx := context.Background()
	evs := make([]*nostr.Event, 200)
	for i := range evs {
		evs[i] = issueEvent(t, 100+i)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range evs {
				ev := evs[(i+w*25)%len(evs)]
				if w%3 == 2 {
					h.OnOwnRelay(ev)
				}
				h.process(ctx, Incoming{Event: ev, Relay: fmt.Sprintf("ws://r%d", w)})
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, ev := range pub.sent {
		count[ev.ID]++
	}
	for id, n := range count {
		if n > 1 {
			t.Fatalf("%s published %d times", id, n)
		}
	}
	if idx.Len() != len(evs) {
		t.Fatalf("indexed %d of %d", idx.Len(), len(evs))
	}
	if n := h.seen.Len(); n != 0 {
		t.Fatalf("%d marks left for indexed events", n)
	}
}

// An indexed id is remembered like a marked one, for between ttl/2 and
// ttl after it was last published or seen: then a copy is published
// again, so a full resync restores what the own relay lost meanwhile.
func TestIndexedIDForgottenAfterTTL(t *testing.T) {
	h, pub, idx := newIndexedHandler(t, 1000)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	h.seen.ttl, h.seen.rotated, h.seen.presentRotated = time.Minute, now, now
	ctx := context.Background()
	ev := issueEvent(t, 5)
	h.process(ctx, Incoming{Event: ev, Relay: "ws://a"})
	now = now.Add(31 * time.Second) // one rotation: the mark is old
	h.process(ctx, Incoming{Event: ev, Relay: "ws://b"})
	if n := len(pub.sent); n != 1 {
		t.Fatalf("published %d times within the TTL, want 1", n)
	}
	now = now.Add(31 * time.Second) // a second rotation: forgotten
	if !idx.Has(ev.ID) || h.Seen(ev.ID) {
		t.Fatalf("after the TTL: indexed %v, seen %v (want indexed, not seen)", idx.Has(ev.ID), h.Seen(ev.ID))
	}
	h.process(ctx, Incoming{Event: ev, Relay: "ws://c"})
	h.process(ctx, Incoming{Event: ev, Relay: "ws://d"})
	if n := len(pub.sent); n != 2 {
		t.Fatalf("published %d times, want 2 (once again after the TTL)", n)
	}
	if n := h.seen.Len(); n != 0 {
		t.Fatalf("%d marks outside the index", n)
	}
}

// Rotations by size (many marks outside the index within each ttl/2) do not
// put off the ageing of the index's marks: an indexed id is still forgotten
// once the TTL passed, so a full resync restores what the own relay lost.
func TestIndexedIDAgesDespiteSizeRotations(t *testing.T) {
	h, _, idx := newIndexedHandler(t, 1000)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	h.seen.ttl, h.seen.rotated, h.seen.presentRotated, h.seen.half = time.Minute, now, now, 2
	ev := issueEvent(t, 7)
	h.process(context.Background(), Incoming{Event: ev, Relay: "ws://a"})
	if !idx.Has(ev.ID) || !h.Seen(ev.ID) {
		t.Fatalf("indexed %v, seen %v", idx.Has(ev.ID), h.Seen(ev.ID))
	}
	var other [32]byte
	for round := range 10 { // 200 s, two marks outside the index every 20 s
		now = now.Add(20 * time.Second)
		for i := range 2 {
			other[0], other[1], other[2] = byte(round), byte(i), 0xff
			h.seen.Mark(other)
		}
	}
	if h.Seen(ev.ID) {
		t.Fatal("the indexed id is still seen after more than three TTLs")
	}
}

// An event the own relay accepts as new is indexed with its filled mark
// (its own relay's Layer 3 need not be read: internal/reposync skips the
// fill); one it already had ("duplicate:") or that the self-subscription
// shows, when the handler does not know it, is indexed without it.
func TestAcceptedAsNewMarkedFilled(t *testing.T) {
	h, _, idx := newIndexedHandler(t, 1000)
	fresh, dup, echoed := issueEvent(t, 1), issueEvent(t, 2), issueEvent(t, 3)
	h.Settle(fresh, publish.Result{ID: fresh.ID, Outcome: publish.Accepted})
	h.Settle(dup, publish.Result{ID: dup.ID, Outcome: publish.Duplicate, Reason: "duplicate: have it"})
	h.OnOwnRelay(echoed)
	for _, c := range []struct {
		ev     *nostr.Event
		filled bool
	}{{fresh, true}, {dup, false}, {echoed, false}} {
		if !idx.Has(c.ev.ID) {
			t.Fatalf("%s not indexed", c.ev.Content)
		}
		if got := idx.Filled(c.ev.ID); got != c.filled {
			t.Errorf("%s: filled %v, want %v", c.ev.Content, got, c.filled)
		}
	}
	// Seen through the self-subscription first, then its OK: still new.
	h.Settle(echoed, publish.Result{ID: echoed.ID, Outcome: publish.Accepted})
	if !idx.Filled(echoed.ID) {
		t.Error("an echoed event accepted as new not marked filled")
	}
}

// The live self-subscription delivers a regular event only when the own
// relay has just stored it: one we sent that it echoes before its OK is
// new at once, and stays so whatever the OK says; one someone else put
// there is indexed without the mark, and so is a replaceable event (khatru
// broadcasts one it did not store).
func TestLiveEchoOfOursMarkedFilled(t *testing.T) {
	h, _, idx := newIndexedHandler(t, 1000)
	ours, theirs := issueEvent(t, 1), issueEvent(t, 2)
	state := signed(t, nostr.Event{Kind: 30618, CreatedAt: 1700000003, Tags: nostr.Tags{{"d", "repo"}}})
	// What process does before it submits: the OK has not come yet.
	for _, ev := range []*nostr.Event{ours, state} {
		id, _ := event.DecodeID(ev.ID)
		h.seen.Mark(id)
		if idx.Has(ev.ID) {
			t.Fatal("indexed before the own relay stored it")
		}
	}
	h.OnOwnRelayLive(ours)
	h.OnOwnRelayLive(theirs)
	h.OnOwnRelayLive(state)
	if !idx.Filled(ours.ID) {
		t.Error("our event echoed live before its OK not marked filled")
	}
	h.Settle(ours, publish.Result{ID: ours.ID, Outcome: publish.Duplicate, Reason: "duplicate: have it"})
	if !idx.Filled(ours.ID) {
		t.Error("the mark was lost to a later duplicate answer")
	}
	for _, ev := range []*nostr.Event{theirs, state} {
		if !idx.Has(ev.ID) || idx.Filled(ev.ID) {
			t.Errorf("kind %d: indexed %v, filled %v; want indexed, not filled", ev.Kind, idx.Has(ev.ID), idx.Filled(ev.ID))
		}
	}
}
