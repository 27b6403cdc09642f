package reposync

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// TestCatchupChunksWithinBudget: a consolidation of 600 roots on a relay
// taking 3 filters per REQ and 20 subscriptions, with 20 values per filter
// configured, widens its filters to leave Layer 1, a historic job and a new
// live REQ room in the budget (30 REQs before: the relay refused some and
// the rebuild consolidated again, in a loop), asks for every root still,
// and never widens past a learned tag-value bound or the message size.
func TestCatchupChunksWithinBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ValuesPerFilter = 20
	e := newBareEngineWith(t, cfg, nil)
	const url = "ws://budget.example"
	e.d.Health.Track(url)
	e.d.Health.SetLimits(url, relay.Limits{MaxSubscriptions: 20, MaxFilters: 3})
	r := &remote{RelayState: repoindex.RelayState{URL: url}}
	repos := []string{nip34.RepoRef(fmt.Sprintf("%064x", 1), "d")}
	var roots []string
	for i := range 600 {
		roots = append(roots, fmt.Sprintf("%064x", i+2))
	}
	since := nostr.Timestamp(1000)
	chunks := e.subs.catchupChunks(r, repos, roots, &since)
	if len(chunks) > 20-3 {
		t.Fatalf("%d REQs besides Layer 1, budget 20", len(chunks))
	}
	asked := map[string]bool{}
	for _, c := range chunks {
		if len(c) > 3 {
			t.Fatalf("a REQ of %d filters, relay takes 3", len(c))
		}
		for _, f := range c {
			if f.Since == nil || *f.Since != since {
				t.Fatalf("since lost: %v", f)
			}
			for _, v := range f.Tags["e"] {
				asked[v] = true
			}
		}
	}
	for _, id := range roots {
		if !asked[id] {
			t.Fatalf("root %s not asked for", id)
		}
	}

	// A relay taking 20,000-byte messages: no filter is widened past what
	// one REQ may carry.
	e.d.Health.SetLimits(url, relay.Limits{MaxSubscriptions: 20, MaxFilters: 3, MaxMessageLength: 20_000})
	for _, c := range e.subs.catchupChunks(r, repos, roots, &since) {
		for _, f := range c {
			if n := historic.FilterBytes(f); n > historic.ReqBytesLimit(e.d.Health.Limits(url)) {
				t.Fatalf("a filter of %d bytes, relay takes 20,000-byte messages", n)
			}
		}
	}

	// A learned bound of 4 tag values is kept: more REQs than the budget
	// then, and no filter over the bound.
	e.d.Health.SetLimits(url, relay.Limits{MaxSubscriptions: 20})
	e.d.Health.Learn(url, relay.Limits{MaxTagValues: 4}, "test")
	for _, c := range e.subs.catchupChunks(r, repos, roots, &since) {
		for _, f := range c {
			for tag, vs := range f.Tags {
				if len(vs) > 4 {
					t.Fatalf("filter on #%s carries %d values, bound 4", tag, len(vs))
				}
			}
		}
	}
}
