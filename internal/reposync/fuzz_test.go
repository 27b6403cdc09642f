package reposync

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
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

// recordingPublish is a PublishFunc that accepts everything and records it.
type recordingPublish struct {
	mu  sync.Mutex
	got []*nostr.Event
}

func (p *recordingPublish) publish(_ context.Context, ev *nostr.Event, done func(Outcome, string)) error {
	p.mu.Lock()
	p.got = append(p.got, ev)
	p.mu.Unlock()
	done(Accepted, "")
	return nil
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

func newTestHandler(t testing.TB, cfg HandlerConfig) (*Handler, *recordingPublish, *RejectedIndex) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	pub := &recordingPublish{}
	rej := NewRejectedIndex(RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}, time.Now)
	h := NewHandler(cfg, pub.publish, nil, rej, m, zap.NewNop())
	return h, pub, rej
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

	h, pub, rej := newTestHandler(t, HandlerConfig{MaxEventBytes: 1 << 20, MaxEventTags: 100})
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
	h, pub, _ := newTestHandler(t, HandlerConfig{MaxEventBytes: 1000, MaxEventTags: 3})
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
		if got := counterValue(t, h.m.eventsInvalid.WithLabelValues(reason)); got != want {
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
		h, pub, rej := newTestHandler(t, HandlerConfig{MaxEventBytes: 1 << 16, MaxEventTags: 100})
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

// FuzzParseAnnouncement: relays taken from an announcement are normalized,
// distinct, never the own relay, and within the limit.
func FuzzParseAnnouncement(f *testing.F) {
	f.Add("repo", "wss://relay.example.com ws://127.0.0.1:7777 wss://relay.example.com/", "https://git.example.com/npub1abc/repo.git", uint8(3))
	f.Add("x", "ws://[::1] ws://169.254.169.254/ http://no wss://UPPER.example:443/p/", "ext::sh -c x", uint8(0))
	f.Add("", "", "", uint8(1))
	f.Add("r", "wss://own.example wss://a wss://b wss://c", "http://h:80/npub1x/r.git", uint8(2))
	const own = "wss://own.example"
	f.Fuzz(func(t *testing.T, d, relays, clone string, max uint8) {
		ev := &nostr.Event{Kind: 30617, PubKey: strings.Repeat("a", 64), Tags: nostr.Tags{{"d", d}, append(nostr.Tag{"relays"}, strings.Fields(relays)...), {"clone", clone}}}
		a, err := ParseAnnouncement(ev, func(u string) bool { return u == own }, int(max))
		if err != nil {
			if d != "" {
				t.Fatalf("refused announcement with d=%q: %v", d, err)
			}
			return
		}
		if a.Ref != RepoRef(ev.PubKey, d) {
			t.Fatalf("ref %q", a.Ref)
		}
		if max > 0 && len(a.Relays) > int(max) {
			t.Fatalf("%d relays over limit %d", len(a.Relays), max)
		}
		seen := map[string]bool{}
		for _, r := range a.Relays {
			if seen[r] || r == own {
				t.Fatalf("duplicate or own relay %q in %v", r, a.Relays)
			}
			seen[r] = true
			checkNormalized(t, r)
		}
	})
}

// FuzzNormalizeRelayURL: the result is a ws/wss URL with a host and no
// credentials, and normalizing it again changes nothing.
func FuzzNormalizeRelayURL(f *testing.F) {
	for _, s := range []string{"wss://relay.example.com/", "WS://Relay.Example.COM:80", "ws://[::1]:443", "wss://u:p@h", "ws://h?x=1#f", "ws://h/a%2Fb/", " wss://h ", "ws://[fe80::1%25eth0]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		norm, err := NormalizeRelayURL(raw)
		if err != nil {
			return
		}
		checkNormalized(t, norm)
	})
}

func checkNormalized(t *testing.T, norm string) {
	t.Helper()
	again, err := NormalizeRelayURL(norm)
	if err != nil || again != norm {
		t.Fatalf("NormalizeRelayURL(%q) = %q, %v: not idempotent", norm, again, err)
	}
	u, err := url.Parse(norm)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.User != nil || u.Hostname() == "" {
		t.Fatalf("normalized %q is not a usable relay URL", norm)
	}
}

// FuzzRootRefs: RootRefs and References never panic, root refs are
// announcement addresses, and references are bounded in size.
func FuzzRootRefs(f *testing.F) {
	f.Add(1617, "a", "30617:"+strings.Repeat("a", 64)+":repo", "t", "root")
	f.Add(1621, "a", "30617:x", "e", "abc")
	f.Add(1618, "q", strings.Repeat("z", 300), "A", "30617:p:d:extra")
	f.Add(1, "a", "30617:p:d", "", "")
	f.Fuzz(func(t *testing.T, kind int, k1, v1, k2, v2 string) {
		ev := &nostr.Event{Kind: kind, Tags: nostr.Tags{{k1, v1}, {k2, v2}, {k1}}}
		refs, ok := RootRefs(ev)
		if ok != (len(refs) > 0) {
			t.Fatalf("ok=%v with %d refs", ok, len(refs))
		}
		for _, r := range refs {
			if !strings.HasPrefix(r, fmt.Sprintf("%d:", 30617)) || strings.Count(r, ":") != 2 {
				t.Fatalf("root ref %q is no announcement address", r)
			}
		}
		for _, r := range References(ev) {
			if len(r) > 200 {
				t.Fatalf("reference of %d bytes", len(r))
			}
		}
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
