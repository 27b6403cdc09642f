package reposync

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
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
	check("FillItems", e.local.FillFilters(false, repos, roots), wantRepos+wantRoots)
	check("FillItems with layer 1", e.local.FillFilters(true, repos, roots), 1+wantRepos+wantRoots)
	fs := e.local.MissingFilters(nostr.Filter{Tags: nostr.TagMap{"a": repos}})
	check("EnsureFilled repositories", fs, wantRepos)
	fs = e.local.MissingFilters(nostr.Filter{Tags: nostr.TagMap{"e": roots}})
	check("EnsureFilled roots", fs, wantRoots)

	needs := &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
	for _, id := range roots {
		needs.Roots.Add(id)
	}
	for i, ref := range repos {
		if i == 0 {
			e.disc.Repos[ref] = needs
			continue
		}
		e.disc.Repos[ref] = &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
	}
	go func() { (<-e.inbox)() }() // the trusted filters ask the Run goroutine
	fs, ok := e.trusted.Filters(context.Background())
	if !ok {
		t.Fatal("trustedFilters gave up")
	}
	check("trusted", fs, 1+wantRepos+wantRoots)
}

// TestFitTagValues: filters over a learned tag-value bound are split into
// filters of at most that many values that together ask for the same
// events; filters within it are left alone.
func TestFitTagValues(t *testing.T) {
	since := nostr.Timestamp(100)
	fs := []nostr.Filter{
		{Kinds: []int{1}},
		{Tags: nostr.TagMap{"e": {"1", "2", "3", "4", "5"}}, Since: &since},
		{Tags: nostr.TagMap{"a": {"x", "y", "z"}, "k": {"1", "2"}}},
	}
	if got := historic.FitTagValues(fs, 5); len(got) != 3 {
		t.Fatalf("within the bound: %d filters, want 3", len(got))
	}
	got := historic.FitTagValues(fs, 2)
	// 1 + ceil(5/2) + ceil(3/2)*1 = 1 + 3 + 2
	if len(got) != 6 {
		t.Fatalf("%d filters, want 6: %v", len(got), got)
	}
	values := map[string]int{}
	for _, f := range got {
		for k, vs := range f.Tags {
			if len(vs) > 2 {
				t.Fatalf("filter %v carries %d values of %s", f, len(vs), k)
			}
			for _, v := range vs {
				values[k+v]++
			}
		}
		if f.Tags["e"] != nil && (f.Since == nil || *f.Since != since) {
			t.Fatalf("since lost: %v", f)
		}
	}
	for _, want := range []string{"e1", "e2", "e3", "e4", "e5", "ax", "ay", "az"} {
		if values[want] != 1 {
			t.Fatalf("value %s in %d filters, want 1", want, values[want])
		}
	}
	if values["k1"] != 2 || values["k2"] != 2 {
		t.Fatalf("the k tag within the bound must go with every chunk of a: %v", values)
	}
	if len(fs[1].Tags["e"]) != 5 {
		t.Fatal("the input was changed")
	}
}
