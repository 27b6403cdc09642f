package ingest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
)

// testKey is a fixed secret key so seeds are reproducible.
const testKey = "5c0c523f52a5b6fad39ed2403092df8cebc36318b39383bca6c00808626fab3a"

func signed(t testing.TB, ev nostr.Event) *nostr.Event {
	t.Helper()
	if err := ev.Sign(testKey); err != nil {
		t.Fatal(err)
	}
	return &ev
}

// recordingPublish is a Publisher that judges like a relay: it refuses an
// event whose signature does not verify as "invalid:" (counted in sent
// only), and accepts and records everything else.
type recordingPublish struct {
	mu   sync.Mutex
	got  []*nostr.Event
	sent []*nostr.Event
}

var _ Publisher = (*recordingPublish)(nil)

func (p *recordingPublish) Submit(ctx context.Context, ev *nostr.Event, done func(publish.Result)) error {
	r, err := p.Publish(ctx, ev)
	if err == nil {
		done(r)
	}
	return err
}

func (p *recordingPublish) Publish(_ context.Context, ev *nostr.Event) (publish.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, ev)
	if ok, err := ev.CheckSignature(); !ok || err != nil {
		return publish.Result{ID: ev.ID, Outcome: publish.Rejected, Reason: "invalid: signature is invalid"}, nil
	}
	p.got = append(p.got, ev)
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}, nil
}

func (p *recordingPublish) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.got))
	for i, ev := range p.got {
		out[i] = ev.ID
	}
	return out
}

// newTestHandler builds a handler over a recordingPublish; a zero QueueLen
// or SeenMax in cfg is given a test size.
func newTestHandler(t testing.TB, cfg Config) (*Handler, *recordingPublish, *RejectedIndex) {
	t.Helper()
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 4096
	}
	if cfg.SeenMax == 0 {
		cfg.SeenMax = DefaultSeenMax
	}
	cfg.Rejected = RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}
	pub := &recordingPublish{}
	h, err := New(cfg, Deps{Publisher: pub, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return h, pub, h.Rejected()
}

// A forged copy of a real event (same id, wrong content or signature)
// arriving first must not keep the real event from being published: it
// never enters the dedupe set or the RejectedIndex.
func TestForgedCopyDoesNotShadowRealEvent(t *testing.T) {
	real := signed(t, nostr.Event{Kind: 1617, CreatedAt: 1700000000, Content: "patch", Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}}})
	forgedContent := *real
	forgedContent.Content = "evil patch"
	forgedSig := *real
	forgedSig.Sig = strings.Repeat("0", 128)
	otherAuthor := *real
	otherAuthor.PubKey = strings.Repeat("b", 64)

	h, pub, rej := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}})
	ctx := context.Background()
	for _, f := range []*nostr.Event{&forgedContent, &forgedSig, &otherAuthor} {
		h.process(ctx, Incoming{Event: f, Relay: "ws://hostile"})
		if h.Seen(real.ID) || rej.Has(real.ID) {
			t.Fatalf("forged copy %+v entered the dedupe set or the RejectedIndex", f)
		}
	}
	if got := pub.ids(); len(got) != 0 {
		t.Fatalf("forged copies published: %v", got)
	}
	h.process(ctx, Incoming{Event: real, Relay: "ws://honest"})
	if got := pub.ids(); len(got) != 1 || got[0] != real.ID {
		t.Fatalf("published %v, want the real event", got)
	}
	if got := pub.got[0].Content; got != "patch" {
		t.Fatalf("published content %q", got)
	}
	// And the real one is deduplicated from now on.
	h.process(ctx, Incoming{Event: real, Relay: "ws://other"})
	if n := len(pub.ids()); n != 1 {
		t.Fatalf("published %d times", n)
	}
}

func TestHandlerBounds(t *testing.T) {
	h, pub, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1000, MaxEventTags: 3}})
	ctx := context.Background()
	big := signed(t, nostr.Event{Kind: 1, CreatedAt: 1, Content: strings.Repeat("x", 2000)})
	tags := signed(t, nostr.Event{Kind: 1, CreatedAt: 1, Tags: nostr.Tags{{"t", "1"}, {"t", "2"}, {"t", "3"}, {"t", "4"}}})
	h.process(ctx, Incoming{Event: big, Size: 2100})
	h.process(ctx, Incoming{Event: tags, Size: 300})
	h.process(ctx, Incoming{Event: &nostr.Event{ID: "not hex"}})
	if got := pub.ids(); len(got) != 0 {
		t.Fatalf("published %v", got)
	}
	for reason, want := range map[string]float64{"too_large": 1, "too_many_tags": 1, "bad_id": 1} {
		if got := testkit.Value(t, h.m.eventsInvalid.WithLabelValues(reason)); got != want {
			t.Errorf("invalid{%s} = %v, want %v", reason, got, want)
		}
	}
	if h.Seen(big.ID) || h.Seen(tags.ID) {
		t.Fatal("an event over a bound was marked seen")
	}
}

// FuzzHandler feeds arbitrary event JSON through validation and dedupe:
// only events whose id and signature verify are ever published or
// remembered, and nothing panics.
func FuzzHandler(f *testing.F) {
	good := signed(f, nostr.Event{Kind: 30617, CreatedAt: 1700000000, Tags: nostr.Tags{{"d", "repo"}, {"relays", "wss://r.example"}}})
	b, _ := json.Marshal(good)
	f.Add(b)
	bad := *good
	bad.Content = "x"
	b, _ = json.Marshal(&bad)
	f.Add(b)
	f.Add([]byte(`{"id":"00","pubkey":"zz","sig":"","kind":-1,"tags":[[]],"content":"\u0000"}`))
	f.Add([]byte(`{"id":"` + strings.Repeat("f", 64) + `","tags":[["e"],["a","30617:x:y"]],"kind":1617}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev nostr.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return
		}
		h, pub, rej := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 16, MaxEventTags: 100}})
		h.process(context.Background(), Incoming{Event: &ev, Size: len(data), Relay: "ws://fuzz"})
		valid := ev.CheckID()
		if valid {
			ok, err := ev.CheckSignature()
			valid = ok && err == nil
		}
		valid = valid && len(data) <= 1<<16 && len(ev.Tags) <= 100
		published := len(pub.ids()) == 1
		if published != valid {
			t.Fatalf("valid=%v but published=%v", valid, published)
		}
		if !valid && (h.Seen(ev.ID) || rej.Has(ev.ID)) {
			t.Fatal("an invalid event was remembered")
		}
	})
}

// Copies of an event the handler has seen are counted as seen again
// (ngit_sync_events_seen_again_total), whichever relay sends them; the
// first copy is not.
func TestSeenAgainCounted(t *testing.T) {
	ev := signed(t, nostr.Event{Kind: 1621, CreatedAt: 1700000000, Content: "issue", Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}}})
	h, pub, _ := newTestHandler(t, Config{EventLimits: EventLimits{MaxEventBytes: 1 << 20, MaxEventTags: 100}})
	ctx := context.Background()
	h.process(ctx, Incoming{Event: ev, Relay: "ws://a"})
	if got := testkit.Value(t, h.m.eventsSeenAgain); got != 0 {
		t.Fatalf("seen again %v after the first copy", got)
	}
	h.process(ctx, Incoming{Event: ev, Relay: "ws://a"})
	h.process(ctx, Incoming{Event: ev, Relay: "ws://b"})
	if got := testkit.Value(t, h.m.eventsSeenAgain); got != 2 {
		t.Fatalf("seen again %v, want 2 (a repeat and another relay's copy)", got)
	}
	if n := len(pub.ids()); n != 1 {
		t.Fatalf("published %d times", n)
	}
}
