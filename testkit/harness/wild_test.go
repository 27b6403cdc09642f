package harness_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestHarnessNegCapAdvertisesAndTruncates: like khatru on its slicestore,
// negentropy sessions see only the newest NegCap events and REQs the newest
// SilentReqCap, while NIP-11 advertises NIP-77 and announces no max_limit.
func TestHarnessNegCapAdvertisesAndTruncates(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true, NegCap: 50, SilentReqCap: 50})
	evs := corpus()[:120]
	r.Inject(evs...)
	c := dial(t, ctx, r.URL())
	need, _, err := c.Negentropy(ctx, "neg", nostr.Filter{Kinds: []int{1}}, nil)
	if err != nil {
		t.Fatalf("Negentropy: %v", err)
	}
	if len(need) != 50 {
		t.Fatalf("need = %d ids, want the 50 newest", len(need))
	}
	newest := ids(evs[len(evs)-50:])
	for _, id := range need {
		if !newest[id] {
			t.Fatalf("need %s is not among the newest 50", id)
		}
	}
	if got := req(t, ctx, c, "r", nostr.Filter{Kinds: []int{1}, Limit: 100}); len(got) != 50 {
		t.Fatalf("REQ limit 100: %d events, want 50", len(got))
	}
	info := nip11(t, r)
	if !containsNIP(info.SupportedNIPs, 77) || info.Limitation.MaxLimit != 0 {
		t.Fatalf("NIP-11 = %+v, want NIP-77 and no max_limit", info)
	}
}

// TestHarnessLimitFallback: ngit-relay's REQ limits — no limit gives 250,
// up to 1000 is honoured, above 1000 silently falls back to 250.
func TestHarnessLimitFallback(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{DefaultLimit: 25, MaxHonouredLimit: 100})
	r.Inject(corpus()[:300]...)
	c := dial(t, ctx, r.URL())
	for _, tc := range []struct{ limit, want int }{{0, 25}, {60, 60}, {100, 100}, {101, 25}, {5000, 25}} {
		if got := req(t, ctx, c, "r", nostr.Filter{Kinds: []int{1}, Limit: tc.limit}); len(got) != tc.want {
			t.Errorf("limit %d: %d events, want %d", tc.limit, len(got), tc.want)
		}
	}
	r2 := harness.Start(t, harness.RelayOptions{IgnoreLimit: true, SilentReqCap: 40})
	r2.Inject(corpus()[:300]...)
	c2 := dial(t, ctx, r2.URL())
	if got := req(t, ctx, c2, "r", nostr.Filter{Kinds: []int{1}, Limit: 5}); len(got) != 40 {
		t.Errorf("IgnoreLimit: limit 5 gave %d events, want 40", len(got))
	}
}

// TestHarnessNegNotice: NIP-77 advertised, NEG-OPEN answered with a NOTICE.
func TestHarnessNegNotice(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{NegNotice: "negentropy disabled"})
	r.Inject(corpus()[:10]...)
	c := dial(t, ctx, r.URL())
	_, _, err := c.Negentropy(ctx, "neg", nostr.Filter{}, nil)
	if !errors.Is(err, harness.ErrNegentropy) || !strings.Contains(err.Error(), "negentropy disabled") {
		t.Fatalf("err = %v, want the NOTICE", err)
	}
	if info := nip11(t, r); !containsNIP(info.SupportedNIPs, 77) {
		t.Fatal("NIP-11 does not advertise 77")
	}
}

// TestHarnessMaxFilters: a REQ with more filters than MaxFilters is CLOSED.
func TestHarnessMaxFilters(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{MaxFilters: 3})
	r.Inject(corpus()[:10]...)
	c := dial(t, ctx, r.URL())
	fs := []any{"REQ", "many"}
	for range 4 {
		fs = append(fs, nostr.Filter{Kinds: []int{1}})
	}
	if err := c.Send(ctx, fs); err != nil {
		t.Fatal(err)
	}
	_, m := untilLabel(t, ctx, c, "CLOSED")
	if !strings.Contains(m, harness.ReasonTooManyFilters) {
		t.Fatalf("got %s", m)
	}
	if got := req(t, ctx, c, "few", nostr.Filter{Kinds: []int{1}}); len(got) != 10 {
		t.Fatalf("3 filters: %d events", len(got))
	}
}

// TestHarnessMaxTagValues: a REQ with a filter carrying more values of one
// tag than MaxTagValues is CLOSED; within it, it is served. NIP-11
// announces the MaxMessageSize enforced unless AnnounceMaxMessage says
// otherwise.
func TestHarnessMaxTagValues(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{MaxTagValues: 2, MaxMessageSize: 20_000, AnnounceMaxMessage: 131_072})
	c := dial(t, ctx, r.URL())
	if err := c.Send(ctx, []any{"REQ", "many", nostr.Filter{Tags: nostr.TagMap{"e": {"a", "b", "c"}}}}); err != nil {
		t.Fatal(err)
	}
	_, m := untilLabel(t, ctx, c, "CLOSED")
	if !strings.Contains(m, harness.ReasonTooManyTagValues) {
		t.Fatalf("got %s", m)
	}
	if got := req(t, ctx, c, "few", nostr.Filter{Tags: nostr.TagMap{"e": {"a", "b"}}}); len(got) != 0 {
		t.Fatalf("2 values: %d events", len(got))
	}
	l, err := relay.FetchLimits(ctx, nil, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxMessageLength != 131_072 {
		t.Fatalf("announced max_message_length %d, want 131072", l.MaxMessageLength)
	}
}

// TestHarnessHoldPurgatory: a GRASP-01 relay accepts a PR into its
// purgatory (OK true "purgatory: …") without serving it until released.
func TestHarnessHoldPurgatory(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{HoldPurgatory: func(ev *nostr.Event) bool { return ev.Kind == 1 }})
	evs := corpus()[:2]
	if err := r.Publish(ctx, evs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if r.Has(evs[0].ID) || len(r.Held()) != 2 {
		t.Fatalf("stored %v, held %d; want held, not stored", r.Has(evs[0].ID), len(r.Held()))
	}
	if n := r.DiscardHeld(); n != 2 || len(r.Held()) != 0 {
		t.Fatalf("discarded %d", n)
	}
	if err := r.Publish(ctx, evs[0]); err != nil {
		t.Fatal(err)
	}
	if n := r.ReleaseHeld(); n != 1 || !r.Has(evs[0].ID) {
		t.Fatalf("released %d, stored %v", n, r.Has(evs[0].ID))
	}
}
