package signed_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

func TestUniverse(t *testing.T) {
	relays := []string{"ws://127.0.0.1:1", "ws://127.0.0.1:2", "ws://127.0.0.1:3"}
	opts := signed.UniverseOptions{Seed: 7, Repos: 6, Relays: relays, Events: 150, PatchSize: 3000}
	u, err := signed.NewUniverse(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Events) != 150 || len(u.Repos) != 6 {
		t.Fatalf("%d events, %d repos", len(u.Events), len(u.Repos))
	}
	again, err := signed.NewUniverse(opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := signed.NewUniverse(signed.UniverseOptions{Seed: 8, Repos: 6, Relays: relays, Events: 12})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range u.Events {
		if ev.ID != again.Events[i].ID || ev.Sig != again.Events[i].Sig {
			t.Fatalf("event %d differs between runs with the same seed", i)
		}
	}
	if other.Events[0].ID == u.Events[0].ID {
		t.Fatal("different seeds gave the same events")
	}

	seen := make(map[string]*nostr.Event)
	kinds := make(map[int]int)
	var last nostr.Timestamp
	for i, ev := range u.Events {
		if !ev.CheckID() {
			t.Fatalf("event %d: bad id", i)
		}
		// verifying is slow under -race; a sample suffices (the relay test
		// below verifies every signature it stores)
		if i%10 == 0 {
			if ok, err := ev.CheckSignature(); !ok || err != nil {
				t.Fatalf("event %s: bad signature", ev.ID)
			}
		}
		if ev.CreatedAt < last {
			t.Fatal("events not in created_at order")
		}
		last = ev.CreatedAt
		// every reference to an event points at an earlier one
		for _, tag := range ev.Tags {
			if len(tag) >= 2 && (tag[0] == "e" || tag[0] == "E") {
				if seen[tag[1]] == nil {
					t.Fatalf("kind %d references %s before it exists", ev.Kind, tag[1])
				}
			}
		}
		seen[ev.ID] = ev
		kinds[ev.Kind]++
	}
	for _, k := range []int{signed.KindAnnouncement, signed.KindState, signed.KindPatch, signed.KindPR, signed.KindIssue, signed.KindComment} {
		if kinds[k] == 0 {
			t.Errorf("no events of kind %d in %v", k, kinds)
		}
	}
	total := 0
	for _, r := range u.Repos {
		total += len(r.Events)
		if len(r.Relays) < 1 || len(r.Relays) > 3 {
			t.Fatalf("repo lists %d relays", len(r.Relays))
		}
	}
	if total != 150 {
		t.Fatalf("repo events sum to %d", total)
	}
	// every relay's share; announcements are accepted by a GRASP relay they list
	covered := 0
	for _, url := range relays {
		covered += len(u.ForRelay(url))
	}
	if covered < 150 {
		t.Fatalf("relay shares cover %d events, want >= 150", covered)
	}
}

// TestHarnessUniverseIntoGraspRelay publishes a small universe through the
// front door of a GRASP-policy relay: every event must be accepted, which
// checks both the generator's tags and the policy.
func TestUniverseIntoGraspRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := harness.Start(t, harness.RelayOptions{Policy: harness.GraspPolicy()})
	u, err := signed.NewUniverse(signed.UniverseOptions{Seed: 1, Repos: 3, Relays: []string{r.URL()}, Events: 60})
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Publish(ctx, r.URL(), u.Events...); err != nil {
		t.Fatalf("publish universe: %v", err)
	}
	if r.Len() != 60 {
		t.Fatalf("relay holds %d events, want 60", r.Len())
	}
}

// TestHarnessCorpusFixture checks the embedded corpus against its generator;
// GRASP_UPDATE_CORPUS=1 regenerates it.
func TestCorpusFixture(t *testing.T) {
	const path = "testdata/corpus.jsonl.gz"
	if os.Getenv("GRASP_UPDATE_CORPUS") != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := signed.WriteCorpus(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		t.Skip("corpus regenerated; run the tests again")
	}
	evs := signed.Corpus()
	if len(evs) != signed.CorpusSize {
		t.Fatalf("corpus has %d events, want %d", len(evs), signed.CorpusSize)
	}
	key := signed.KeyFromSeed("corpus")
	for i, ev := range evs {
		if want := signed.CorpusNote(i, false); ev.ID != want.ID || !ev.CheckID() || ev.PubKey != key.PubKey {
			t.Fatalf("corpus event %d does not match its generator", i)
		}
		if i%100 == 0 {
			if ok, err := ev.CheckSignature(); !ok || err != nil {
				t.Fatalf("corpus event %d: bad signature", i)
			}
		}
	}
	evs[0].Content = "changed"
	if signed.Corpus()[0].Content == "changed" {
		t.Fatal("Corpus returns shared events")
	}
}

// TestHarnessUniverseForge checks the forge shape: about half the events
// after the announcements and states are roots, the rest refer to a root,
// none to an announcement.
func TestUniverseForge(t *testing.T) {
	u, err := signed.NewUniverse(signed.UniverseOptions{Seed: 3, Repos: 10, Relays: []string{"ws://127.0.0.1:1"},
		Events: 2000, SkipSignatures: true, Forge: true})
	if err != nil {
		t.Fatal(err)
	}
	roots, anns := map[string]bool{}, map[string]bool{}
	for _, repo := range u.Repos {
		anns[repo.Announcement.ID] = true
		for _, r := range repo.Roots {
			roots[r.ID] = true
		}
	}
	discussion := 0
	for _, ev := range u.Events {
		if ev.Kind == signed.KindAnnouncement || ev.Kind == signed.KindState || roots[ev.ID] {
			continue
		}
		discussion++
		onRoot := false
		for _, tag := range ev.Tags {
			if len(tag) >= 2 && tag[0] == "e" && anns[tag[1]] {
				t.Fatalf("event kind %d refers to an announcement", ev.Kind)
			}
			if len(tag) >= 2 && (tag[0] == "e" || tag[0] == "E" || tag[0] == "q") && roots[tag[1]] {
				onRoot = true
			}
		}
		if !onRoot {
			t.Fatalf("discussion event kind %d refers to no root: %v", ev.Kind, ev.Tags)
		}
	}
	if n := len(roots); n < 900 || n > 1100 || n+discussion != 2000-20 {
		t.Fatalf("%d roots, %d discussion events of %d, want about half roots", n, discussion, 2000-20)
	}
}
