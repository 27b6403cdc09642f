package discovery

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// lateDiscovery is discovery with a root wait of 15 s on a manual clock,
// the roots the own relay stores noted (no state store), a hosted
// repository listing relay wss://r.example, and the WARN lines it logs.
func lateDiscovery(t *testing.T) (*Discovery, *clock.Manual, *observer.ObservedLogs, *[]map[string]repoindex.Items) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	core, logs := observer.New(zap.WarnLevel)
	var applied []map[string]repoindex.Items
	e := newTestDiscovery(t, func(s *Settings, d *Deps) {
		s.RootWait = 15 * time.Second
		d.Clock, d.Log = clk, zap.New(core)
		d.Unapplied = NewUnappliedRoots(s.SelfKinds, clk, nil)
		d.Applied = func(delta map[string]repoindex.Items) { applied = append(applied, delta) }
	})
	return e, clk, logs, &applied
}

// A root the own relay acknowledged storing that no batch applies within
// the root wait is applied from its note at the next refresh: the index
// holds it, the relays of its repository are asked about it, it is
// counted, and the first time one WARN line says so. One its batch
// applied in time is not counted, nor is one that did not wait long
// enough.
func TestOverdueRootsApplied(t *testing.T) {
	e, clk, logs, applied := lateDiscovery(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref := nip34.RepoRef(pk, "repo")
	e.Repos[ref] = &repoindex.RepoNeeds{Relays: repoindex.SetOf("wss://r.example"), Roots: repoindex.NewSet()}
	issue := func(n int) *nostr.Event {
		ev := nostr.Event{Kind: nip34.KindIssue, CreatedAt: nostr.Timestamp(n), Tags: nostr.Tags{{"a", ref}}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return &ev
	}
	missed, batched := issue(1), issue(2)
	e.h.Settle(missed, acceptedResult(missed))
	e.h.Settle(batched, acceptedResult(batched))
	e.ApplyBatch([]*nostr.Event{batched}) // its echo came
	*applied = nil

	clk.Advance(15*time.Second - time.Millisecond)
	e.PublishRepos()
	if e.Repos[ref].Roots.Has(missed.ID) || len(*applied) != 0 {
		t.Fatal("a root applied before it waited the root wait")
	}
	clk.Advance(time.Millisecond)
	e.PublishRepos()
	if !e.Repos[ref].Roots.Has(missed.ID) {
		t.Fatal("a root no batch applied within the root wait is not in the index")
	}
	if len(*applied) != 1 || !(*applied)[0]["wss://r.example"].Roots.Has(missed.ID) {
		t.Fatalf("applied %v, want the root for its repository's relay", *applied)
	}
	if got := e.unapplied.AppliedLate(); got != 1 {
		t.Fatalf("%d roots counted as applied late, want 1 (the one its batch applied is not)", got)
	}
	if n := len(e.unapplied.roots); n != 0 {
		t.Fatalf("%d roots still noted once the index holds them", n)
	}

	// Another one later: counted, no second WARN line.
	again := issue(3)
	e.h.Settle(again, acceptedResult(again))
	clk.Advance(20 * time.Second)
	e.PublishRepos()
	if got := e.unapplied.AppliedLate(); got != 2 || !e.Repos[ref].Roots.Has(again.ID) {
		t.Fatalf("applied late %d, in the index %v; want 2 and true", got, e.Repos[ref].Roots.Has(again.ID))
	}
	if n := logs.FilterMessageSnippet("sync.root_wait").Len(); n != 1 {
		t.Fatalf("%d WARN lines about roots applied late, want 1", n)
	}
	if e.unapplied.Stuck() != 0 {
		t.Fatalf("%d roots reported stuck", e.unapplied.Stuck())
	}
}

// A root of a repository whose announcement is not applied waits as an
// orphan when it is overdue; when the orphans' bound refuses it, it stays
// noted and is reported (Stuck, one WARN line) until it can be applied.
func TestOverdueRootsStuckAtOrphanBound(t *testing.T) {
	e, clk, logs, _ := lateDiscovery(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	ref := nip34.RepoRef(pk, "unannounced")
	ev := nostr.Event{Kind: nip34.KindPatch, CreatedAt: 1, Tags: nostr.Tags{{"a", ref}}}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	e.h.Settle(&ev, acceptedResult(&ev))

	e.orphanCount = maxOrphanRoots // the bound is reached
	clk.Advance(15 * time.Second)
	e.PublishRepos()
	e.PublishRepos()
	if got := e.unapplied.Stuck(); got != 1 {
		t.Fatalf("%d roots reported stuck, want 1", got)
	}
	if _, ok := e.unapplied.roots[ev.ID]; !ok {
		t.Fatal("a root the orphans' bound refused is no longer noted")
	}
	if n := logs.FilterMessageSnippet("orphan roots' bound").Len(); n != 1 {
		t.Fatalf("%d WARN lines about roots that cannot be applied, want 1", n)
	}
	if e.unapplied.AppliedLate() != 0 {
		t.Fatal("a root that could not be applied counted as applied late")
	}

	// Room again: it waits as an orphan, and is no longer reported.
	e.orphanCount = 0
	e.PublishRepos()
	if !e.orphans[ref].Has(ev.ID) || e.unapplied.Stuck() != 0 || e.unapplied.AppliedLate() != 1 {
		t.Fatalf("orphan %v, stuck %d, late %d; want true, 0, 1", e.orphans[ref].Has(ev.ID), e.unapplied.Stuck(), e.unapplied.AppliedLate())
	}
}
