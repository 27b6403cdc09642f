package discovery

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// TestSelfBatchRootBeforeAnnouncement: the self-subscription streams newest
// first, so a batch can hold root events whose announcement only comes in
// a later batch. Those roots must not be lost.
func TestSelfBatchRootBeforeAnnouncement(t *testing.T) {
	e := newTestDiscovery(t, nil)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref := nip34.RepoRef(pk, "repo")
	sign := func(ev *nostr.Event) *nostr.Event {
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	var roots []*nostr.Event
	for i := range 3 {
		roots = append(roots, sign(&nostr.Event{Kind: 1621, CreatedAt: nostr.Timestamp(2000 + i), Content: "issue",
			Tags: nostr.Tags{{"a", ref}}}))
	}
	ann := sign(&nostr.Event{Kind: 30617, CreatedAt: 1000, Tags: nostr.Tags{{"d", "repo"}, {"relays", "wss://relay.example.com"}}})

	e.ApplyBatch(roots) // the repository is not known yet
	if _, ok := e.Repos[ref]; ok {
		t.Fatal("a root event created the repository")
	}
	e.ApplyBatch([]*nostr.Event{ann})
	needs := e.Repos[ref]
	if needs == nil {
		t.Fatal("announcement not applied")
	}
	for _, r := range roots {
		if !needs.Roots.Has(r.ID) {
			t.Errorf("root %s seen before its announcement was lost", r.ID[:8])
		}
	}
	if e.orphanCount != 0 || len(e.orphans) != 0 {
		t.Errorf("orphans left: %d in %d repos", e.orphanCount, len(e.orphans))
	}
	// The relay the announcement lists is asked about the roots too.
	target, _ := repoindex.DeriveRelayTarget(e.Repos, "wss://relay.example.com", false)
	if target.Roots.Len() != len(roots) {
		t.Errorf("relay target has %d roots, want %d", target.Roots.Len(), len(roots))
	}
}

// TestOrphanRootsBounded: a root tagging a malformed reference is not kept,
// and roots whose announcement never came are dropped once the own relay's
// history has been read.
func TestOrphanRootsBounded(t *testing.T) {
	e := newTestDiscovery(t, nil)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	root := &nostr.Event{Kind: 1621, CreatedAt: 2000, Content: "issue", Tags: nostr.Tags{
		{"a", nip34.RepoRef(pk, "never-announced")}, {"a", "30617:nothex:x"}, {"a", "30617:" + pk + ":"},
	}}
	if err := root.Sign(sk); err != nil {
		t.Fatal(err)
	}
	e.ApplyBatch([]*nostr.Event{root})
	if e.orphanCount != 1 || len(e.orphans) != 1 {
		t.Fatalf("kept %d orphans under %d refs, want only the well-formed ref", e.orphanCount, len(e.orphans))
	}
	e.dropOrphans()
	if e.orphanCount != 0 || len(e.orphans) != 0 {
		t.Fatalf("%d orphans left after dropOrphans", e.orphanCount)
	}
	for ref, want := range map[string]bool{
		nip34.RepoRef(pk, "d"): true, "30617:" + pk + ":": false, "30617:" + pk: false,
		"30618:" + pk + ":d": false, "30617:" + strings.ToUpper(pk) + ":d": false,
	} {
		if got := validRepoRef(ref); got != want {
			t.Errorf("validRepoRef(%q) = %t, want %t", ref, got, want)
		}
	}
}

// TestBatchedDropsRootContent: a self batch keeps a root without its
// content (a patch's diff waits for ApplyBatch, which reads only the
// id and tags), leaves the event the handler got untouched, and keeps
// announcements and states whole (noteHead persists their JSON).
func TestBatchedDropsRootContent(t *testing.T) {
	patch := &nostr.Event{ID: "p", Kind: nip34.KindPatch, Content: "diff --git a/x b/x", Tags: nostr.Tags{{"a", "30617:pk:repo"}}}
	b := batched(patch)
	if b.Content != "" || b.ID != "p" || len(b.Tags) != 1 || patch.Content == "" {
		t.Fatalf("batched patch %+v, original content %q", b, patch.Content)
	}
	for _, k := range []int{nip34.KindRepoAnnouncement, nip34.KindRepoState} {
		ev := &nostr.Event{ID: "h", Kind: k, Content: "kept"}
		if batched(ev) != ev {
			t.Fatalf("kind %d not kept whole", k)
		}
	}
}
