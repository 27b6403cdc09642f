package reposync

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// TestValuesPerFilterReachesEveryChunking: a non-default ValuesPerFilter
// given to New is what every filter-building path chunks by: the own-relay
// fills of the local set (FillItems and EnsureFilled) and the trusted
// relays' reconciliation filters.
func TestValuesPerFilterReachesEveryChunking(t *testing.T) {
	const per, nRepos, nRoots = 7, 30, 16
	cfg := DefaultConfig()
	if cfg.ValuesPerFilter == per {
		t.Fatalf("the default is already %d; pick another value", per)
	}
	cfg.ValuesPerFilter = per
	idx, err := localindex.New(localindex.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e := newBareEngineWith(t, cfg, idx)

	var repos, roots []string
	for i := range nRepos {
		sk := nostr.GeneratePrivateKey()
		p, _ := nostr.GetPublicKey(sk)
		repos = append(repos, nip34.RepoRef(p, fmt.Sprintf("r%d", i)))
	}
	for i := range nRoots {
		roots = append(roots, fmt.Sprintf("%064x", i+1))
	}
	ceil := func(n int) int { return (n + per - 1) / per }
	wantRepos, wantRoots := 3*ceil(nRepos), 3*ceil(nRoots)
	check := func(name string, fs []nostr.Filter, want int) {
		t.Helper()
		if len(fs) != want {
			t.Errorf("%s: %d filters, want %d", name, len(fs), want)
		}
		for _, f := range fs {
			for tag, vs := range f.Tags {
				if len(vs) > per {
					t.Errorf("%s: filter on #%s carries %d values, want at most %d", name, tag, len(vs), per)
				}
			}
		}
	}

	if e.local == nil {
		t.Fatal("no local set built with a LocalIndex")
	}
	check("FillItems", e.local.fillFilters(false, repos, roots), wantRepos+wantRoots)
	check("FillItems with layer 1", e.local.fillFilters(true, repos, roots), 1+wantRepos+wantRoots)
	_, fs := e.local.missingLocked(nostr.Filter{Tags: nostr.TagMap{"a": repos}})
	check("EnsureFilled repositories", fs, wantRepos)
	_, fs = e.local.missingLocked(nostr.Filter{Tags: nostr.TagMap{"e": roots}})
	check("EnsureFilled roots", fs, wantRoots)

	needs := &RepoNeeds{Relays: set{}, Roots: set{}}
	for _, id := range roots {
		needs.Roots[id] = struct{}{}
	}
	for i, ref := range repos {
		if i == 0 {
			e.repos[ref] = needs
			continue
		}
		e.repos[ref] = &RepoNeeds{Relays: set{}, Roots: set{}}
	}
	go func() { (<-e.inbox)() }() // trustedFilters asks the Run goroutine
	fs, ok := e.trustedFilters(context.Background())
	if !ok {
		t.Fatal("trustedFilters gave up")
	}
	check("trusted", fs, 1+wantRepos+wantRoots)
}
