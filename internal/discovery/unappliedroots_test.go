package discovery

import (
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

func acceptedResult(ev *nostr.Event) publish.Result {
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}
}

// A root on the own relay is in the saved repository index from the
// moment the local index could have it (the OK of the sidecar's copy)
// until a batch applies it, and after that as a root of the index; one
// whose announcement is not applied yet stays too. Events that are not
// roots are not kept, nor is anything saved before the first snapshot.
func TestUnappliedRootsSaved(t *testing.T) {
	e := newTestDiscovery(t, func(_ *Settings, d *Deps) { d.KeepHeads = true })
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref, later := nip34.RepoRef(pk, "repo"), nip34.RepoRef(pk, "later")
	sign := func(ev nostr.Event) *nostr.Event {
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return &ev
	}
	issue := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 1, Tags: nostr.Tags{{"a", ref}}})
	e.reposWanted.Store(true)
	e.h.Settle(issue, acceptedResult(issue))
	if got := e.RepoState(); got.Gen != 0 || got.Roots != nil {
		t.Fatalf("saved before the first snapshot: %+v", got)
	}

	e.Repos[ref] = &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
	e.reposGen++
	e.PublishRepos()
	before := e.RepoState()
	reply := sign(nostr.Event{Kind: nip34.KindPatch, CreatedAt: 2, Tags: nostr.Tags{{"a", ref}, {"e", issue.ID}}})
	comment := sign(nostr.Event{Kind: 1111, CreatedAt: 3, Tags: nostr.Tags{{"E", issue.ID}}})
	pr := sign(nostr.Event{Kind: nip34.KindPullRequest, CreatedAt: 4, Tags: nostr.Tags{{"a", later}}})
	e.h.Settle(reply, acceptedResult(reply))
	e.h.Settle(comment, acceptedResult(comment))
	e.h.Settle(pr, acceptedResult(pr))
	e.PublishRepos()
	got := e.RepoState()
	if !slices.Equal(got.Roots[ref], []string{issue.ID}) || !slices.Equal(got.Roots[later], []string{pr.ID}) {
		t.Fatalf("saved roots %v, want the issue and the PR of a repository not applied yet", got.Roots)
	}
	if got.Gen == before.Gen {
		t.Fatal("the saved index's generation did not change: the store would not write it")
	}
	if !slices.Equal(before.Roots[ref], []string{issue.ID}) {
		t.Fatalf("an earlier state changed under the store: %v", before.Roots[ref])
	}

	// The batches apply them (the PR as an orphan until its
	// announcement): the refresh forgets them, the index keeps them.
	e.ApplyBatch([]*nostr.Event{issue, pr})
	e.PublishRepos()
	if n := len(e.unapplied.roots); n != 0 {
		t.Fatalf("%d applied roots still kept as unapplied", n)
	}
	got = e.RepoState()
	if !slices.Equal(got.Roots[ref], []string{issue.ID}) || !slices.Equal(got.Roots[later], []string{pr.ID}) {
		t.Fatalf("saved roots %v after the batches, want each once", got.Roots)
	}

	// A root seen on the self-subscription is noted as well (others'
	// roots, and a relay's GRASP purgatory releasing ours).
	live := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 5, Tags: nostr.Tags{{"a", ref}}})
	e.NoteRoot(live)
	if got := e.RepoState(); !slices.Contains(got.Roots[ref], live.ID) {
		t.Fatalf("saved roots %v, want the live root too", got.Roots[ref])
	}

	// When the own relay's history is read, roots of repositories without
	// an announcement are dropped with the orphans; the others stay.
	lost := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 6, Tags: nostr.Tags{{"a", nip34.RepoRef(pk, "never")}}})
	e.NoteRoot(lost)
	e.dropOrphans()
	if _, ok := e.unapplied.roots[lost.ID]; ok {
		t.Fatal("a root of a repository without an announcement kept after the orphans were dropped")
	}
	if _, ok := e.unapplied.roots[live.ID]; !ok {
		t.Fatal("a hosted repository's root not applied yet was dropped with the orphans")
	}

	// Only well-formed references are noted, the ones a batch can keep: a
	// root with none would wait for a snapshot that never holds it, saved
	// with every state.
	bad := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 7, Tags: nostr.Tags{{"a", "30617:not-a-pubkey:repo"}}})
	e.NoteRoot(bad)
	if _, ok := e.unapplied.roots[bad.ID]; ok {
		t.Fatal("a root with only a malformed reference is waiting to be applied")
	}
	mixed := sign(nostr.Event{Kind: nip34.KindIssue, CreatedAt: 8, Tags: nostr.Tags{{"a", "30617:not-a-pubkey:repo"}, {"a", ref}}})
	e.NoteRoot(mixed)
	if refs := e.unapplied.roots[mixed.ID].refs; !slices.Equal(refs, []string{ref}) {
		t.Fatalf("a root with a malformed and a hosted reference noted under %v, want the hosted one", refs)
	}
}

// The saved cursor of the own relay's history does not pass the paging's
// batches until they are applied: a restart pages them again.
func TestSelfCursorWaitsForHistoryBatches(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	e := newTestDiscovery(t, func(_ *Settings, d *Deps) { d.Clock = clk })
	before := time.Unix(1_600_000_000, 0)
	e.restoredSelfSeen = before
	e.selfLive.Store(true)
	e.historyBatches.Add(1)
	if got := e.selfSeenTime(); !got.Equal(before) {
		t.Fatalf("cursor %v with a history batch waiting, want %v", got, before)
	}
	e.historyBatches.Add(-1)
	if got := e.selfSeenTime(); !got.Equal(clk.Now()) {
		t.Fatalf("cursor %v once applied, want now (%v)", got, clk.Now())
	}
}
