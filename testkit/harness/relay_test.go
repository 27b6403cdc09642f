package harness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

const waitTimeout = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial opens a harness client connection (go-nostr's Relay races in Close
// under -race, see harness.Client).
func dial(t *testing.T, ctx context.Context, url string) *harness.Client {
	t.Helper()
	c, err := harness.Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// req runs a REQ to EOSE and fails the test on anything else.
func req(t *testing.T, ctx context.Context, c *harness.Client, sub string, f nostr.Filter) []*nostr.Event {
	t.Helper()
	res, err := c.Req(ctx, sub, f)
	if err != nil {
		t.Fatalf("REQ %s: %v", sub, err)
	}
	if !res.EOSE {
		t.Fatalf("REQ %s: no EOSE (closed %q, notices %q)", sub, res.Closed, res.Notices)
	}
	return res.Events
}

// notes builds n kind-1 notes with created_at base, base+1, ….
func notes(k *signed.Key, n int, base nostr.Timestamp) []*nostr.Event {
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = &nostr.Event{Kind: 1, CreatedAt: base + nostr.Timestamp(i), Content: fmt.Sprintf("note %d", i), Tags: nostr.Tags{}}
	}
	signed.SignAll([]*signed.Key{k}, evs)
	return evs
}

// corpus returns the harness's pre-signed notes (signing is slow under
// -race), oldest first.
func corpus() []*nostr.Event { return signed.Corpus() }

func ids(evs []*nostr.Event) map[string]bool {
	m := make(map[string]bool, len(evs))
	for _, ev := range evs {
		m[ev.ID] = true
	}
	return m
}

func TestHarnessPublishAndQuery(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	k := signed.NewKey()
	evs := notes(k, 20, 1_700_000_000)

	if err := harness.Publish(ctx, r.URL(), evs...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// publishing again: duplicates are not errors
	if err := harness.Publish(ctx, r.URL(), evs[:3]...); err != nil {
		t.Fatalf("Publish duplicates: %v", err)
	}
	if got := r.Count(nostr.Filter{Kinds: []int{1}}); got != 20 {
		t.Fatalf("Count = %d, want 20", got)
	}

	c := dial(t, ctx, r.URL())
	got := req(t, ctx, c, "q", nostr.Filter{Authors: []string{k.PubKey}})
	if len(got) != 20 {
		t.Fatalf("REQ returned %d events, want 20", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].CreatedAt < got[i].CreatedAt {
			t.Fatalf("REQ results not newest first at %d", i)
		}
	}

	// Inject bypasses live subscriptions; Delete works behind clients' back.
	req(t, ctx, c, "live", nostr.Filter{Kinds: []int{1}, LimitZero: true})
	injected := notes(k, 2, 1_700_001_000)
	if n := r.Inject(injected...); n != 2 {
		t.Fatalf("Inject stored %d, want 2", n)
	}
	published := notes(signed.NewKey(), 1, 1_700_002_000)[0]
	if err := harness.Publish(ctx, r.URL(), published); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	msg, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("live subscription got nothing: %v", err)
	}
	if harness.Label(msg) != "EVENT" || !strings.Contains(msg, published.ID) {
		t.Fatalf("live subscription got %s, want only the published %s (injected events must bypass it)", msg, published.ID)
	}
	if !r.Has(injected[0].ID) {
		t.Fatal("injected event not in store")
	}
	if n := r.Delete(injected[0].ID, "0000"); n != 1 {
		t.Fatalf("Delete = %d, want 1", n)
	}
	if r.Has(injected[0].ID) {
		t.Fatal("deleted event still in store")
	}
	if got, want := len(r.IDs()), 22; got != want {
		t.Fatalf("IDs has %d, want %d", got, want)
	}
}

func TestHarnessUncappedReturnsEverything(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Negentropy: true})
	r.Inject(corpus()...)
	c := dial(t, ctx, r.URL())
	got := req(t, ctx, c, "all", nostr.Filter{Kinds: []int{1}})
	if len(got) != len(corpus()) {
		t.Fatalf("uncapped REQ returned %d events, want %d", len(got), len(corpus()))
	}
	got = req(t, ctx, c, "ten", nostr.Filter{Kinds: []int{1}, Limit: 10})
	if len(got) != 10 {
		t.Fatalf("REQ limit 10 returned %d events", len(got))
	}
}

func TestHarnessReqCapTruncatesToNewest(t *testing.T) {
	ctx := testCtx(t)
	const capN = 500
	r := harness.Start(t, harness.RelayOptions{ReqCap: capN})
	evs := corpus()
	r.Inject(evs...)

	c := dial(t, ctx, r.URL())
	res, err := c.Req(ctx, "capped", nostr.Filter{Kinds: []int{1}})
	if err != nil || !res.EOSE {
		t.Fatalf("REQ: %+v, %v", res, err)
	}
	got := res.Events
	if len(got) != capN {
		t.Fatalf("capped REQ returned %d events, want %d", len(got), capN)
	}
	newest := ids(evs[len(evs)-capN:])
	for _, ev := range got {
		if !newest[ev.ID] {
			t.Fatalf("capped REQ returned %s (created_at %d), not among the newest %d", ev.ID, ev.CreatedAt, capN)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].CreatedAt < got[i].CreatedAt {
			t.Fatalf("results not ordered created_at desc at %d", i)
		}
	}
	// a smaller limit still applies; a larger one is cut silently
	if small := req(t, ctx, c, "small", nostr.Filter{Kinds: []int{1}, Limit: 7}); len(small) != 7 {
		t.Fatalf("limit 7: %d events", len(small))
	}
	big, err := c.Req(ctx, "big", nostr.Filter{Kinds: []int{1}, Limit: 5000})
	if err != nil || len(big.Events) != capN {
		t.Fatalf("limit 5000: %d events, err %v", len(big.Events), err)
	}
	if len(res.Notices)+len(big.Notices) != 0 || r.Stats().Sent["NOTICE"] != 0 {
		t.Fatalf("cap must be silent, got NOTICEs %q %q", res.Notices, big.Notices)
	}
	// the test helpers see everything
	if n := r.Count(nostr.Filter{Kinds: []int{1}}); n != len(evs) {
		t.Fatalf("Count = %d, want %d", n, len(evs))
	}
}

func TestHarnessPublishReportsRejections(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{Policy: func(_ *harness.Relay, ev *nostr.Event) (bool, string) {
		return ev.Content != "bad", "blocked: bad content"
	}})
	k := signed.NewKey()
	good := k.Sign(&nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "good"})
	bad := k.Sign(&nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "bad"})
	err := harness.Publish(ctx, r.URL(), good, bad)
	var rej *harness.RejectedError
	if !errors.Is(err, harness.ErrRejected) || !errors.As(err, &rej) {
		t.Fatalf("Publish error = %v, want a RejectedError", err)
	}
	if rej.ID != bad.ID || rej.Reason != "blocked: bad content" {
		t.Fatalf("rejection = %+v", rej)
	}
	if !r.Has(good.ID) || r.Has(bad.ID) {
		t.Fatal("policy not applied")
	}
}

func TestHarnessLiveDelivery(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	k := signed.NewKey()
	c := dial(t, ctx, r.URL())
	req(t, ctx, c, "notes", nostr.Filter{Kinds: []int{1}, LimitZero: true})
	req(t, ctx, c, "issues", nostr.Filter{Kinds: []int{signed.KindIssue}, LimitZero: true})
	if res, err := c.Req(ctx, "both", nostr.Filter{Kinds: []int{1}, LimitZero: true}, nostr.Filter{Authors: []string{k.PubKey}, LimitZero: true}); err != nil || !res.EOSE {
		t.Fatalf("REQ both: %+v %v", res, err)
	}

	note := notes(k, 1, 1_700_000_000)[0]
	if err := r.Publish(ctx, note); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if harness.Label(m) != "EVENT" || !strings.Contains(m, note.ID) {
			t.Fatalf("got %s", m)
		}
		got[strings.Split(m, `"`)[3]] = true
	}
	if !got["notes"] || !got["both"] {
		t.Fatalf("delivered to %v, want notes and both (once each)", got)
	}
	if err := c.CloseSub(ctx, "notes"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitTimeout, "the close", func() bool { return r.Stats().Closes == 1 })
	note2 := notes(k, 1, 1_700_000_100)[0]
	if err := r.Publish(ctx, note2); err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(ctx)
	if err != nil || !strings.HasPrefix(m, `["EVENT","both"`) || !strings.Contains(m, note2.ID) {
		t.Fatalf("after CLOSE got %s %v, want only sub both", m, err)
	}
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("unexpected %s", m)
	}
	// a duplicate is not delivered again
	if err := r.Publish(ctx, note2); err != nil {
		t.Fatal(err)
	}
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("duplicate delivered: %s", m)
	}
}
