package localindex

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
)

func randHex(r *rand.Rand) string {
	var b [32]byte
	for i := 0; i < 32; i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return hex.EncodeToString(b[:])
}

// genEvents builds n unsigned events shaped like a NIP-34 relay's content:
// announcements and states per repository, roots (patches, PRs, issues)
// tagging their repository, statuses and NIP-22 comments tagging a root,
// and kind-1 replies. Repositories, authors and roots repeat; comment
// parents are mostly unique.
func genEvents(seed uint64, n, repos, authors int) []*nostr.Event {
	r := rand.New(rand.NewPCG(seed, 77))
	pubs := make([]string, authors)
	for i := range pubs {
		pubs[i] = randHex(r)
	}
	addr := func(i int) string { return fmt.Sprintf("30617:%s:repo-%d", pubs[i%authors], i) }
	var roots []string
	events := make([]*nostr.Event, 0, n)
	for i := 0; i < n; i++ {
		ev := &nostr.Event{
			ID:        randHex(r),
			PubKey:    pubs[r.IntN(authors)],
			CreatedAt: nostr.Timestamp(1_700_000_000 + r.IntN(10_000_000)),
		}
		repo := r.IntN(repos)
		x := r.IntN(100)
		switch {
		case x < 2 || len(roots) == 0:
			ev.Kind = 30617
			ev.PubKey = pubs[repo%authors]
			ev.Tags = nostr.Tags{{"d", fmt.Sprintf("repo-%d", repo)}, {"name", "x"}, {"clone", "https://git.example/x.git"}, {"relays", "wss://relay.example"}}
		case x < 5:
			ev.Kind = 30618
			ev.PubKey = pubs[repo%authors]
			ev.Tags = nostr.Tags{{"d", fmt.Sprintf("repo-%d", repo)}, {"refs/heads/main", randHex(r)[:40]}, {"HEAD", "ref: refs/heads/main"}}
		case x < 20:
			ev.Kind = []int{1617, 1618, 1621}[r.IntN(3)]
			ev.Tags = nostr.Tags{{"a", addr(repo)}, {"p", pubs[repo%authors]}, {"t", "root"}}
			roots = append(roots, ev.ID)
		case x < 40:
			ev.Kind = 1630 + r.IntN(4)
			ev.Tags = nostr.Tags{{"e", roots[r.IntN(len(roots))], "", "root"}, {"a", addr(repo)}, {"p", pubs[repo%authors]}}
		case x < 80:
			ev.Kind = 1111
			root := roots[r.IntN(len(roots))]
			parent := root
			if len(events) > 0 && r.IntN(2) == 0 {
				parent = events[r.IntN(len(events))].ID
			}
			ev.Tags = nostr.Tags{{"E", root}, {"A", addr(repo)}, {"e", parent}, {"a", addr(repo)}, {"K", "1617"}, {"P", pubs[repo%authors]}}
		default:
			ev.Kind = 1
			ev.Tags = nostr.Tags{{"e", roots[r.IntN(len(roots))], "", "root"}, {"q", roots[r.IntN(len(roots))]}}
		}
		events = append(events, ev)
	}
	return events
}

// bruteForce answers a filter with nostr.Filter.Matches.
func bruteForce(events []*nostr.Event, f nostr.Filter) []string {
	var ids []string
	for _, ev := range events {
		if f.Matches(ev) {
			ids = append(ids, ev.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func itemIDs(items []neg.Item) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = hex.EncodeToString(it.ID[:])
	}
	slices.Sort(ids)
	return ids
}

func mustNew(t testing.TB, opt Options) *Index {
	t.Helper()
	x, err := New(opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func ts(v int) *nostr.Timestamp {
	t := nostr.Timestamp(v)
	return &t
}
