package ingest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestRejectedIndex(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	r := NewRejectedIndex(RejectedConfig{HotTTL: time.Minute, HotMax: 2, ColdTTL: time.Hour, ColdMax: 3}, clock)
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	ev := func(i int, ref string) *nostr.Event {
		return &nostr.Event{ID: id(i), CreatedAt: nostr.Timestamp(i), Kind: 1111, Tags: nostr.Tags{{"e", ref}}}
	}
	r.Add(ev(1, "root"))
	r.Add(ev(2, "root"))
	r.Add(ev(3, "other"))
	if hot, cold := r.Len(); hot != 2 || cold != 3 {
		t.Fatalf("len %d/%d, want 2 hot (bounded) / 3 cold", hot, cold)
	}
	// Event 1 was evicted from the hot cache: accepting "root" retries 2
	// and forgets 1 so the next sync fetches it again.
	retry, forgotten := r.DependencyAccepted("root")
	if len(retry) != 1 || retry[0].ID != id(2) || !reflect.DeepEqual(forgotten, []string{id(1)}) {
		t.Fatalf("retry %v forgotten %v", retry, forgotten)
	}
	if r.Has(id(1)) || r.Has(id(2)) || !r.Has(id(3)) {
		t.Fatal("dependents not forgotten")
	}
	r.Add(ev(4, "x"))
	r.Add(ev(5, "x"))
	r.Add(ev(6, "x"))
	if _, cold := r.Len(); cold != 3 {
		t.Fatalf("cold %d, want bounded at 3", cold)
	}
	if r.Has(id(3)) {
		t.Fatal("oldest cold entry not evicted")
	}
	now = now.Add(2 * time.Hour)
	r.Expire()
	if hot, cold := r.Len(); hot != 0 || cold != 0 {
		t.Fatalf("after TTL: %d/%d", hot, cold)
	}
	var n int
	r.Add(ev(7, "y"))
	r.Items(func(int64, [32]byte) { n++ })
	if n != 1 {
		t.Fatalf("Items yielded %d", n)
	}
}

func TestSeenSet(t *testing.T) {
	now := time.Unix(0, 0)
	s := newSeenSet(4, time.Minute, func() time.Time { return now })
	k := func(i byte) [32]byte { return [32]byte{i} }
	if !s.Mark(k(1)) || s.Mark(k(1)) {
		t.Fatal("Mark is not check-and-set")
	}
	s.Mark(k(2))
	s.Mark(k(3)) // rotates: cur {3}, old {1,2}
	if !s.Has(k(1)) || !s.Has(k(3)) {
		t.Fatal("lost an id on size rotation")
	}
	s.Mark(k(4))
	s.Mark(k(5)) // rotates again: old {3,4}
	if s.Has(k(1)) {
		t.Fatal("size bound not applied")
	}
	now = now.Add(31 * time.Second)
	if !s.Has(k(5)) {
		t.Fatal("forgot an id before ttl/2")
	}
	now = now.Add(61 * time.Second)
	if s.Has(k(5)) || s.Len() != 0 {
		t.Fatal("remembered an id past the ttl")
	}
	s.Mark(k(9))
	s.Forget(k(9))
	if s.Has(k(9)) {
		t.Fatal("Forget did not forget")
	}
}

func TestRejectedAfterDependencyAcceptedRetriesOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRejectedIndex(RejectedConfig{HotTTL: time.Minute, HotMax: 10, ColdTTL: time.Hour, ColdMax: 10}, func() time.Time { return now })
	reply := &nostr.Event{ID: fmt.Sprintf("%064x", 1), Kind: 1111, Tags: nostr.Tags{{"E", "root"}}}
	// The root's acceptance is reported before the reply's rejection.
	r.DependencyAccepted("root")
	if !r.Add(reply) {
		t.Fatal("a rejection after its dependency's acceptance was not retried")
	}
	if r.Has(reply.ID) {
		t.Fatal("an event to retry was recorded as rejected")
	}
	if r.Add(reply) || !r.Has(reply.ID) {
		t.Fatal("the second rejection was retried again instead of recorded")
	}
	other := &nostr.Event{ID: fmt.Sprintf("%064x", 2), Kind: 1111, Tags: nostr.Tags{{"E", "root"}}}
	now = now.Add(2 * time.Minute)
	if r.Add(other) {
		t.Fatal("retried for an acceptance older than the hot TTL")
	}
}
