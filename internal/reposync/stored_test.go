package reposync

import (
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
)

// A root the own relay stored for the sidecar is in the saved repository
// index from its OK on, before the self-subscription's batch applies it
// (and after the engine stopped); once the index has it, it is kept there
// only. Events that are not roots are not kept.
func TestStoredRootsSavedUntilApplied(t *testing.T) {
	e := newBareEngineDeps(t, DefaultConfig(), func(d *Deps) { d.KeepHeads = true })
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref := nip34.RepoRef(pk, "repo")
	sign := func(ev nostr.Event) *nostr.Event {
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return &ev
	}
	e.repos[ref] = &RepoNeeds{Relays: newSet(), Roots: newSet()}
	e.reposGen++
	e.reposWanted.Store(true)
	e.refreshSnapshot()
	before := e.RepoState()

	issue := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 1, Tags: nostr.Tags{{"a", ref}}})
	reply := sign(nostr.Event{Kind: nip34.KindPatch, CreatedAt: 2, Tags: nostr.Tags{{"a", ref}, {"e", issue.ID}}})
	comment := sign(nostr.Event{Kind: 1111, CreatedAt: 3, Tags: nostr.Tags{{"E", issue.ID}}})
	e.h.Settle(issue, acceptedResult(issue))
	e.h.Settle(reply, acceptedResult(reply))
	e.h.Settle(comment, acceptedResult(comment))

	got := e.RepoState()
	if !slices.Equal(got.Roots[ref], []string{issue.ID}) {
		t.Fatalf("saved roots %v, want the stored issue only", got.Roots[ref])
	}
	if got.Gen == before.Gen {
		t.Fatal("the saved index's generation did not change: the store would not write it")
	}
	if len(before.Roots[ref]) != 0 {
		t.Fatalf("the earlier snapshot changed under the store: %v", before.Roots[ref])
	}

	// The batch applies it: the refresh forgets it, the index keeps it.
	e.applySelfBatch([]*nostr.Event{issue})
	e.refreshSnapshot()
	if e.stored.roots[issue.ID] != nil {
		t.Fatal("an applied root is still kept as stored")
	}
	if got := e.RepoState(); !slices.Equal(got.Roots[ref], []string{issue.ID}) {
		t.Fatalf("saved roots %v after the batch, want the issue once", got.Roots[ref])
	}

	// A root of a repository the sidecar does not host is forgotten.
	other := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 4, Tags: nostr.Tags{{"a", nip34.RepoRef(strings.Repeat("b", 64), "x")}}})
	e.h.Settle(other, acceptedResult(other))
	e.refreshSnapshot()
	if len(e.stored.roots) != 0 {
		t.Fatalf("stored roots %v, want none", e.stored.roots)
	}
}

func acceptedResult(ev *nostr.Event) publish.Result {
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}
}
