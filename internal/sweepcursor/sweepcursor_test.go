package sweepcursor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// TestBounded: at most max cursors are kept, the least recently used
// dropped first.
func TestBounded(t *testing.T) {
	cs := New(2, time.Minute)
	ctx := With(context.Background())
	now := time.Unix(1000, 0)
	f := func(k int) nostr.Filter { return nostr.Filter{Kinds: []int{k}} }
	for _, k := range []int{1, 2, 1, 3} {
		cs.Open(ctx, "ws://a", f(k), now).Advance(5, nil)
	}
	if cs.Len() != 2 || cs.Open(ctx, "ws://a", f(1), now).Prev == nil || cs.Open(ctx, "ws://a", f(2), now).Prev != nil {
		t.Fatalf("kept %d; want 2, kind 2 (least recently used) dropped", cs.Len())
	}
	cs.Forget("ws://b")
	if cs.Len() != 2 {
		t.Fatal("Forget dropped another relay's cursors")
	}
	cs.Forget("ws://a")
	if cs.Len() != 0 {
		t.Fatalf("%d cursors after Forget", cs.Len())
	}
}

// TestResumesWhereTheLastGot: a sweep of the same filter on the same
// relay resumes the last one's position, once it has one; its top-up
// starts slack before the last one began (not below the filter's since);
// a sweep replaced by a later one records nothing more.
func TestResumesWhereTheLastGot(t *testing.T) {
	cs := New(0, time.Minute)
	ctx := With(context.Background())
	f := nostr.Filter{Kinds: []int{1621}}
	first := cs.Open(ctx, "ws://a", f, time.Unix(1000, 0))
	if first.Prev != nil {
		t.Fatal("a first sweep resumes something")
	}
	if cs.Open(ctx, "ws://a", f, time.Unix(1010, 0)).Prev != nil {
		t.Fatal("a sweep resumes one that never got anywhere")
	}
	first = cs.Open(ctx, "ws://a", f, time.Unix(1000, 0))
	first.Advance(700, map[string]struct{}{"x": {}, "y": {}})
	if other := cs.Open(ctx, "ws://b", f, time.Unix(1020, 0)); other.Prev != nil {
		t.Fatal("another relay's sweep resumes this one")
	}
	second := cs.Open(ctx, "ws://a", f, time.Unix(2000, 0))
	if p := second.Prev; p == nil || p.Until != 700 || p.T0 != 1000 || !p.Started || p.Done {
		t.Fatalf("resumed %+v, want until 700 from a sweep begun at 1000", p)
	}
	b := slices.Clone(second.Prev.Boundary)
	slices.Sort(b)
	if !slices.Equal(b, []string{"x", "y"}) {
		t.Fatalf("boundary %v", b)
	}
	if got := second.TopUpSince(f); got != 1000-60 {
		t.Fatalf("top-up since %d, want 940", got)
	}
	since := nostr.Timestamp(980)
	if got := second.TopUpSince(nostr.Filter{Since: &since}); got != 980 {
		t.Fatalf("top-up since %d, want the filter's own 980", got)
	}
	first.Advance(100, nil) // replaced: ignored
	second.ToppedUp()
	second.Advance(500, nil)
	second.Finish()
	third := cs.Open(ctx, "ws://a", f, time.Unix(3000, 0))
	if p := third.Prev; p == nil || !p.Done || p.T0 != 2000 || p.Until != 500 {
		t.Fatalf("after a finished sweep: %+v, want done, begun at 2000", p)
	}
}

// TestIdentity: a filter's identity ignores its limit and the order of
// its tags, not its since or until; outside With, and with no Cursors,
// there is no sweep.
func TestIdentity(t *testing.T) {
	ts := nostr.Timestamp(5)
	a := nostr.Filter{Tags: nostr.TagMap{"a": {"x"}, "e": {"y"}}, Limit: 5}
	b := nostr.Filter{Tags: nostr.TagMap{"e": {"y"}, "a": {"x"}}, Limit: 500}
	if identity(a) != identity(b) {
		t.Error("the same filter with another limit is another identity")
	}
	c := a
	c.Until = &ts
	if identity(a) == identity(c) {
		t.Error("a filter's own until is not part of its identity")
	}
	d := a
	d.Tags = nostr.TagMap{"a": {"x", "y"}}
	if identity(a) == identity(d) {
		t.Error("values moved between tags keep the identity")
	}
	cs := New(0, time.Minute)
	if cs.Open(context.Background(), "ws://a", a, time.Now()) != nil {
		t.Error("a sweep outside With got a cursor")
	}
	var none *Cursors
	if none.Open(With(context.Background()), "ws://a", a, time.Now()) != nil || none.Len() != 0 {
		t.Error("a nil Cursors keeps cursors")
	}
	var sw *Sweep
	sw.Advance(1, nil) // a sweep without cursor records nothing
	sw.Finish()
	sw.ToppedUp()
}
