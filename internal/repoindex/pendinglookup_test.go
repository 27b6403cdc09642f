package repoindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// pendingBatches makes n batches of per roots (and one repository each)
// from a pool of pool names, with handles interned.
func pendingBatches(rng *rand.Rand, n, per, pool int) []*PendingBatch {
	var out []*PendingBatch
	for i := 0; i < n; i++ {
		b := &PendingBatch{ID: uint64(i), Items: NewItems()}
		b.Items.Repos.Add(fmt.Sprintf("30617:%064x:lookup-%d", 0, rng.IntN(pool)))
		for j := 0; j < per; j++ {
			b.Items.Roots.Add(fmt.Sprintf("%064x", 1<<50+rng.IntN(pool)))
		}
		out = append(out, b)
	}
	return out
}

// The union a pendingLookup builds answers as asking each batch does, for
// members and non-members, repositories and roots, whichever way it takes.
func TestPendingLookupAgreesWithBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	for round := 0; round < 200; round++ {
		batches := pendingBatches(rng, rng.IntN(40), rng.IntN(20), 500)
		for _, repo := range []bool{false, true} {
			checks := []int{0, 1, 10, 1000}[rng.IntN(4)]
			l := NewPendingLookup(batches, repo, checks)
			for k := 0; k < 200; k++ {
				var name string
				if repo {
					name = fmt.Sprintf("30617:%064x:lookup-%d", 0, rng.IntN(600))
				} else {
					name = fmt.Sprintf("%064x", 1<<50+rng.IntN(600))
				}
				h := Intern(name)
				if got, want := l.Has(h), PendingHasH(batches, h, repo); got != want {
					t.Fatalf("round %d (repo %v, %d batches, union %v): has(%s) = %v, the batches say %v",
						round, repo, len(batches), l.union != nil, name, got, want)
				}
				if got, want := l.HasName(name), PendingHasH(batches, h, repo); got != want {
					t.Fatalf("round %d: hasName(%s) = %v, want %v", round, name, got, want)
				}
			}
		}
	}
	// Many checks against many batches take the union; few do not.
	batches := pendingBatches(rng, 100, 10, 5000)
	if l := NewPendingLookup(batches, false, 1000); l.union == nil {
		t.Error("1,000 checks against 100 batches of 10 roots asked each batch")
	}
	if l := NewPendingLookup(batches, false, 5); l.union != nil {
		t.Error("5 checks against 100 batches of 10 roots built their union")
	}
}

// BenchmarkComputeActionsPending times computeActions for a relay with
// 2,000 pending batches of 100 roots (a relay waiting for its subscription
// budget at the large profile) and a target of 1,000 new roots, asking
// each batch for each root (scan, the code before pendingLookup) against
// pendingLookup (lookup), interleaved by -count.
//
//	go test -run '^$' -bench ComputeActionsPending -count 5 ./internal/reposync/
func BenchmarkComputeActionsPending(b *testing.B) {
	const url = "wss://bench-pending"
	rng := rand.New(rand.NewPCG(1, 2))
	batches := pendingBatches(rng, 2000, 100, 1_000_000)
	target := Target{Repos: NewSet(), Roots: NewSet()}
	for i := 0; i < 1000; i++ {
		target.Roots.Add(fmt.Sprintf("%064x", 1<<52+i))
	}
	st := &RelayState{URL: url, Status: Connected, Confirmed: NewItems()}
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			add := NewItems()
			for h := range target.Roots.Handles() {
				if !st.Confirmed.Roots.HasH(h) && !PendingHasH(batches, h, false) {
					add.Roots.AddH(h)
				}
			}
			if add.Roots.Len() != 1000 {
				b.Fatal(add.Roots.Len())
			}
		}
	})
	b.Run("lookup", func(b *testing.B) {
		targets := map[string]Target{url: target}
		pending := map[string][]*PendingBatch{url: batches}
		relays := map[string]*RelayState{url: st}
		for b.Loop() {
			if acts := ComputeActions(targets, pending, relays); len(acts) != 1 || acts[0].Items.Roots.Len() != 1000 {
				b.Fatal(acts)
			}
		}
	})
}
