package ingest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// ownKhatru starts a khatru own relay and a handler publishing into it
// through a real publisher; both stop with the test.
func ownKhatru(t *testing.T) (*Handler, *harness.Store) {
	t.Helper()
	store := harness.NewStore()
	url := harness.StartKhatru(t, store, nil)
	pcfg := publish.DefaultConfig()
	pcfg.OKTimeout, pcfg.DialTimeout = 5*time.Second, 5*time.Second
	dial := func(ctx context.Context) (*relay.Conn, error) { return relay.Dial(ctx, url, relay.DefaultOptions()) }
	pub, err := publish.New(pcfg, dial, nil, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Rejected = RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}
	h, err := New(cfg, Deps{Publisher: pub, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = pub.Run(ctx) }()
	go func() { defer wg.Done(); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h, store
}

// A forged copy (the real id and content, a signature that does not
// verify) arrives first: the sidecar does not verify it, it goes to the
// own relay, which refuses it as invalid:; the handler drops it and forgets
// its id, and the real event arriving afterwards is published and stored.
func TestForgedCopyFirstRefusedByOwnRelayThenRealStored(t *testing.T) {
	h, store := ownKhatru(t)
	real := signed(t, nostr.Event{Kind: 1621, CreatedAt: 1700000000, Content: "issue", Tags: nostr.Tags{{"a", "30617:" + strings.Repeat("a", 64) + ":repo"}}})
	forged := *real
	forged.Sig = strings.Repeat("1", 128)
	ctx := context.Background()

	if err := h.Handle(ctx, Incoming{Event: &forged, Size: 400, Relay: "ws://hostile"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the own relay's invalid: for the forged copy", func() bool {
		return testkit.Value(t, h.m.eventsInvalid.WithLabelValues("bad_signature")) == 1
	})
	if h.Seen(real.ID) || h.Rejected().Has(real.ID) {
		t.Fatal("the refused forged copy left its id in the dedupe set or the RejectedIndex")
	}
	if n := testkit.Value(t, h.m.eventsRejected.WithLabelValues("invalid")); n != 0 {
		t.Fatalf("invalid: counted as a rejection (%v)", n)
	}
	if store.Len() != 0 {
		t.Fatal("the own relay stored the forged copy")
	}
	// A fetch that waited for this copy asks its own relay at once.
	if key, _ := event.DecodeID(real.ID); h.IDState(key) != IDInvalid {
		t.Fatalf("after the own relay's invalid: the id's state is %d, want IDInvalid", h.IDState(key))
	}

	if err := h.Handle(ctx, Incoming{Event: real, Size: 400, Relay: "ws://honest"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the real event stored", func() bool { return store.Get(real.ID) != nil })
	if got := store.Get(real.ID); got.Sig != real.Sig {
		t.Fatalf("stored signature %s, want the real one", got.Sig)
	}
	testkit.WaitFor(t, 10*time.Second, "the real event counted as synced", func() bool {
		return testkit.Value(t, h.m.eventsSynced) == 1
	})
}

// gatedPublish holds every submission until release, then answers like a
// relay that verifies (invalid: for a bad signature).
type gatedPublish struct {
	recordingPublish
	mu      sync.Mutex
	pending []func()
}

func (p *gatedPublish) Submit(ctx context.Context, ev *nostr.Event, done func(publish.Result)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, func() {
		r, _ := p.recordingPublish.Publish(ctx, ev)
		done(r)
	})
	return nil
}

func (p *gatedPublish) release() {
	p.mu.Lock()
	list := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, f := range list {
		f()
	}
}

// The real event arrives while a forged copy is still in flight: the
// second, different copy is verified and waits (OKs are matched by id, so
// two copies cannot be in flight at once); the forged copy's invalid: sends
// it, and further copies are dropped without being sent.
func TestDifferentCopyWhileForgedInFlight(t *testing.T) {
	pub := &gatedPublish{}
	cfg := DefaultConfig()
	cfg.Rejected = RejectedConfig{HotTTL: time.Minute, HotMax: 100, ColdTTL: time.Hour, ColdMax: 1000}
	h, err := New(cfg, Deps{Publisher: pub, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	real := signed(t, nostr.Event{Kind: 1, CreatedAt: 1700000000, Content: "hello"})
	forged := *real
	forged.Sig = strings.Repeat("2", 128)
	forged2 := *real
	forged2.Sig = strings.Repeat("3", 128)
	ctx := context.Background()
	h.process(ctx, Incoming{Event: &forged, Relay: "ws://hostile"})
	h.process(ctx, Incoming{Event: &forged2, Relay: "ws://hostile"}) // verified, dropped
	h.process(ctx, Incoming{Event: real, Relay: "ws://honest"})      // verified, waits
	h.process(ctx, Incoming{Event: real, Relay: "ws://other"})       // a duplicate of the waiting copy
	if n := len(pub.pending); n != 1 {
		t.Fatalf("%d copies sent, want the forged first copy only", n)
	}
	pub.release() // invalid: for the forged copy
	if !h.Seen(real.ID) {
		t.Fatal("the forged copy's invalid: cleared the id while the real copy waited")
	}
	select {
	case ev := <-h.retries:
		h.route(ctx, ev)
	default:
		t.Fatal("the waiting real copy was not sent after the forged copy was refused")
	}
	pub.release()
	if got := pub.ids(); len(got) != 1 || got[0] != real.ID || pub.got[0].Sig != real.Sig {
		t.Fatalf("stored %v, want the real event", got)
	}
	if !h.Seen(real.ID) || h.flying.len() != 0 {
		t.Fatalf("seen=%v in flight=%d after both copies settled", h.Seen(real.ID), h.flying.len())
	}
	if n := testkit.Value(t, h.m.eventsInvalid.WithLabelValues("bad_signature")); n != 2 {
		t.Fatalf("bad_signature = %v, want 2 (the second forged copy, checked; the first, refused)", n)
	}
	h.process(ctx, Incoming{Event: real, Relay: "ws://late"})
	if n := len(pub.pending); n != 0 {
		t.Fatalf("a settled event was sent again")
	}
}
