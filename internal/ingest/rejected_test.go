package ingest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
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
	r.Items(func(int64, event.ID) { n++ })
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

// rejectFirst is a Publisher that refuses each event the first time it is
// published ("blocked: ..."), as a GRASP relay refuses an event whose
// dependency it does not hold yet, and accepts it after that.
type rejectFirst struct {
	mu   sync.Mutex
	seen map[string]int
	pub  chan string // ids, in publish order
}

func newRejectFirst() *rejectFirst {
	return &rejectFirst{seen: map[string]int{}, pub: make(chan string, 64)}
}

func (p *rejectFirst) Publish(_ context.Context, ev *nostr.Event) (publish.Result, error) {
	p.mu.Lock()
	p.seen[ev.ID]++
	n := p.seen[ev.ID]
	p.mu.Unlock()
	p.pub <- ev.ID
	if n == 1 {
		return publish.Result{ID: ev.ID, Outcome: publish.Rejected, Reason: "blocked: no accepted announcement"}, nil
	}
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}, nil
}

func (p *rejectFirst) Submit(ctx context.Context, ev *nostr.Event, done func(publish.Result)) error {
	r, err := p.Publish(ctx, ev)
	if err == nil {
		done(r)
	}
	return err
}

// next waits for the next publish.
func (p *rejectFirst) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-p.pub:
		return id
	case <-time.After(5 * time.Second):
		t.Fatal("nothing published")
		return ""
	}
}

func runRejectFirst(t *testing.T) (*Handler, *rejectFirst) {
	t.Helper()
	pub := newRejectFirst()
	cfg := DefaultConfig()
	cfg.QueueLen = 64
	h, err := New(cfg, Deps{Publisher: pub, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, pub
}

// TestRejectedInvalidatedByThirdATag: a patch tagging three repositories is
// refused; the announcement of the third being accepted brings it back.
func TestRejectedInvalidatedByThirdATag(t *testing.T) {
	h, pub := runRejectFirst(t)
	owner := nostr.GeneratePrivateKey()
	ownerPK, _ := nostr.GetPublicKey(owner)
	refs := []string{nip34.RepoRef(ownerPK, "one"), nip34.RepoRef(ownerPK, "two"), nip34.RepoRef(ownerPK, "three")}
	patch := signed(t, nostr.Event{Kind: nip34.KindPatch, CreatedAt: 1700000000, Content: "patch",
		Tags: nostr.Tags{{"a", refs[0]}, {"a", refs[1]}, {"a", refs[2]}, {"t", "root"}}})
	ctx := context.Background()
	if err := h.Handle(ctx, Incoming{Event: patch, Relay: "ws://r"}); err != nil {
		t.Fatal(err)
	}
	if id := pub.next(t); id != patch.ID {
		t.Fatalf("published %s first, want the patch", id)
	}
	testkit.WaitFor(t, 5*time.Second, "rejection recorded", func() bool { return h.Rejected().Has(patch.ID) })

	ann := &nostr.Event{Kind: nip34.KindRepoAnnouncement, CreatedAt: 1700000001, Tags: nostr.Tags{{"d", "three"}}}
	if err := ann.Sign(owner); err != nil {
		t.Fatal(err)
	}
	h.Settle(ann, publish.Result{ID: ann.ID, Outcome: publish.Accepted})
	if id := pub.next(t); id != patch.ID {
		t.Fatalf("published %s, want the patch again", id)
	}
}

// TestRejectedInvalidatedByRootOnOwnRelay: a comment refused for want of
// its root comes back when another client posts the root to the own relay
// (seen through the self-subscription, not through our publishes).
func TestRejectedInvalidatedByRootOnOwnRelay(t *testing.T) {
	h, pub := runRejectFirst(t)
	root := signed(t, nostr.Event{Kind: nip34.KindIssue, CreatedAt: 1700000000, Content: "issue",
		Tags: nostr.Tags{{"a", nip34.RepoRef(strings.Repeat("a", 64), "repo")}}})
	comment := signed(t, nostr.Event{Kind: nip34.KindComment, CreatedAt: 1700000001, Content: "reply",
		Tags: nostr.Tags{{"E", root.ID}, {"e", root.ID}}})
	ctx := context.Background()
	if err := h.Handle(ctx, Incoming{Event: comment, Relay: "ws://r"}); err != nil {
		t.Fatal(err)
	}
	if id := pub.next(t); id != comment.ID {
		t.Fatalf("published %s first, want the comment", id)
	}
	testkit.WaitFor(t, 5*time.Second, "rejection recorded", func() bool { return h.Rejected().Has(comment.ID) })

	h.OnOwnRelay(root)
	if id := pub.next(t); id != comment.ID {
		t.Fatalf("published %s, want the comment again", id)
	}
	if h.Rejected().Has(comment.ID) {
		t.Fatal("comment still in the RejectedIndex")
	}
}
