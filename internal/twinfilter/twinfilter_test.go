package twinfilter

import (
	"context"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

func dial(t *testing.T, url string) *relay.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := relay.Dial(ctx, url, relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBoth: only a filter tagging roots by `E` alone has a twin; its
// since and until are kept, its limit dropped.
func TestBoth(t *testing.T) {
	ts := nostr.Timestamp(10)
	both, ok := Both(nostr.Filter{Tags: nostr.TagMap{"E": {"x", "y"}}, Since: &ts, Limit: 500})
	if !ok || len(both.Tags) != 2 || len(both.Tags["e"]) != 2 || len(both.Tags["E"]) != 2 || both.Since == nil || *both.Since != 10 || both.Limit != 0 {
		t.Fatalf("Both: %+v, %v", both, ok)
	}
	for _, f := range []nostr.Filter{
		{Tags: nostr.TagMap{"e": {"x"}}},
		{Tags: nostr.TagMap{"E": {"x"}, "k": {"1111"}}},
		{Tags: nostr.TagMap{"E": {"x"}}, Kinds: []int{1111}},
		{Tags: nostr.TagMap{"E": {"x"}}, Authors: []string{"a"}},
		{Tags: nostr.TagMap{"E": {}}},
		{Kinds: []int{1111}},
	} {
		if _, ok := Both(f); ok {
			t.Errorf("%v has a twin", f)
		}
	}
}

// TestCovered: a root's `E` filter is covered while every comment on it
// is a top-level one (it tags the root by `e` too); a nested comment
// (`e` names its parent comment) or a PR update (`E` only) makes it not.
// A filter of another shape is never covered, and asks no COUNT.
func TestCovered(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "counts"})
	alice := signed.NewKey()
	issue := alice.Issue(alice.RepoAddress("d"), "an issue")
	top := alice.Comment(issue, nil)
	r.Inject(issue, top, alice.Comment(issue, nil))
	c := dial(t, r.URL())
	ch := New(5*time.Second, nil)
	ctx := context.Background()
	f := nostr.Filter{Tags: nostr.TagMap{"E": {issue.ID}}}
	if !ch.Covered(ctx, c, f) {
		t.Fatal("top-level comments only: not covered")
	}
	if ch.Covered(ctx, c, nostr.Filter{Tags: nostr.TagMap{"e": {issue.ID}}}) {
		t.Fatal("an `e` filter covered")
	}
	r.Inject(alice.Comment(issue, top))
	if ch.Covered(ctx, c, f) {
		t.Fatal("a nested comment, tagging the root by `E` only, is left out")
	}
	var counts int
	for _, m := range r.Received(time.Time{}) {
		if m.Type == "COUNT" {
			counts++
		}
	}
	if counts != 4 {
		t.Fatalf("%d COUNTs, want two per `E` filter", counts)
	}
	var none *Checker
	if none.Covered(ctx, c, f) {
		t.Fatal("a nil Checker covers")
	}
}

// TestNoCount: a relay refusing COUNT is not asked again (each `E`
// filter is swept), nor is one that does not answer within the timeout;
// a connection ending during the COUNT says nothing about the relay.
func TestNoCount(t *testing.T) {
	f := nostr.Filter{Tags: nostr.TagMap{"E": {"00"}}}
	ctx := context.Background()
	refusing := harness.StartKhatru(t, nil, func(rl *khatru.Relay) { rl.CountEvents = nil })
	c := dial(t, refusing)
	ch := New(5*time.Second, nil)
	for range 2 {
		if ch.Covered(ctx, c, f) {
			t.Fatal("covered on a relay refusing COUNT")
		}
	}
	if st := ch.state[c.URL()].support; st != noCount {
		t.Fatalf("support %d, want noCount", st)
	}

	silent := harness.Start(t, harness.RelayOptions{Name: "silent", Faults: harness.Faults{Mute: true}})
	c2 := dial(t, silent.URL())
	ch2 := New(100*time.Millisecond, nil)
	if ch2.Covered(ctx, c2, f) || ch2.state[c2.URL()].support != noCount {
		t.Fatal("a relay not answering COUNT is asked again")
	}

	gone := dial(t, refusing)
	gone.Close()
	ch3 := New(5*time.Second, nil)
	if ch3.Covered(ctx, gone, f) {
		t.Fatal("covered on a closed connection")
	}
	if _, known := ch3.state[gone.URL()]; known {
		t.Fatal("a closed connection recorded the relay's COUNT support")
	}
}
