package ownset

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// acceptAll is a Publisher that accepts every event at once.
type acceptAll struct{}

func (acceptAll) Submit(_ context.Context, ev *nostr.Event, done func(publish.Result)) error {
	done(publish.Result{ID: ev.ID, Outcome: publish.Accepted})
	return nil
}

func (acceptAll) Publish(_ context.Context, ev *nostr.Event) (publish.Result, error) {
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}, nil
}

// forgeEvents returns n events shaped like the large bench profile's
// forges, with valid ids (unsigned: the handler checks the id hash, the
// own relay the signature): half roots (patches, PRs, issues) tagging one
// of repos repositories, half NIP-22 comments under a root.
func forgeEvents(n, repos int) []*nostr.Event {
	r := rand.New(rand.NewPCG(16, 22))
	authors := make([]string, 300)
	for i := range authors {
		authors[i] = fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
	}
	var roots []*nostr.Event
	evs := make([]*nostr.Event, 0, n)
	for i := range n {
		repo := r.IntN(repos)
		addr := nip34.RepoRef(authors[repo%len(authors)], fmt.Sprintf("repo-%d", repo))
		ev := &nostr.Event{PubKey: authors[r.IntN(len(authors))], CreatedAt: nostr.Timestamp(1_700_000_000 + r.IntN(10_000_000))}
		if i%2 == 0 || len(roots) == 0 {
			ev.Kind = []int{1617, 1618, 1621}[r.IntN(3)]
			ev.Content = fmt.Sprintf("root %d", i)
			ev.Tags = nostr.Tags{{"a", addr}, {"p", authors[repo%len(authors)]}, {"t", "root"}}
		} else {
			root := roots[r.IntN(len(roots))]
			ev.Kind = 1111
			ev.Content = fmt.Sprintf("comment %d", i)
			ev.Tags = nostr.Tags{{"E", root.ID}, {"A", root.Tags[0][1]}, {"e", root.ID}, {"a", root.Tags[0][1]}, {"K", fmt.Sprint(root.Kind)}, {"P", root.PubKey}}
		}
		ev.ID = ev.GetID()
		if ev.Kind != 1111 {
			roots = append(roots, ev)
		}
		evs = append(evs, ev)
	}
	return evs
}

// BenchmarkPerEventBytes reports the heap bytes per event (B/event) of the
// per-event structures together, after n events went through the handler
// to an own relay that accepted them all and the own-relay fill marked
// every root filled: the LocalIndex, the dedupe set, the RejectedIndex's
// memory of accepted dependencies and the fill's filled set. The events
// themselves are not counted (held by the benchmark throughout).
//
//	go test -run '^$' -bench PerEventBytes -count 3 ./internal/reposync/
func BenchmarkPerEventBytes(b *testing.B) {
	const n = 200_000
	evs := forgeEvents(n, 2000)
	var per float64
	for b.Loop() {
		before := testkit.HeapInUse()
		idx, err := localindex.New(localindex.DefaultOptions(), nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := ingest.DefaultConfig()
		cfg.RelayRate, cfg.RelayQueue, cfg.RelayQueueBytes = 0, 0, 0
		h, err := ingest.New(cfg, ingest.Deps{Publisher: acceptAll{}, Present: idx, Registry: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		o := NewOwnLocalSet(idx, nil, 100, 500, 0, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Run(ctx) }()
		for _, ev := range evs {
			if err := h.Handle(ctx, ingest.Incoming{Event: ev, Size: 500, Relay: "ws://remote"}); err != nil {
				b.Fatal(err)
			}
		}
		for h.Pending() > 0 {
			runtime.Gosched()
		}
		cancel()
		wg.Wait()
		for _, ev := range evs {
			if ev.Kind != 1111 {
				o.filled.add(ev.ID)
			}
		}
		if idx.Len() != n {
			b.Fatalf("indexed %d of %d", idx.Len(), n)
		}
		per = float64(testkit.HeapInUse()-before) / n
		runtime.KeepAlive(h)
		runtime.KeepAlive(o)
	}
	runtime.KeepAlive(evs)
	b.ReportMetric(per, "B/event")
}

// BenchmarkFilledBytes reports the heap bytes per root id (B/root) of the
// own-relay fill memory as it is (filledSet) and as it was (a map of
// strings), in the same run.
//
//	go test -run '^$' -bench FilledBytes -count 3 ./internal/historic/
func BenchmarkFilledBytes(b *testing.B) {
	const n = 200_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	for _, v := range []struct {
		name    string
		build   func() any
		members int // 0: n
	}{
		{"filled-map-of-strings", func() any {
			m := map[string]bool{}
			for _, r := range roots {
				m[r] = true
			}
			return m
		}, 0},
		{"filledSet", func() any {
			f := newFilledSet()
			for _, r := range roots {
				f.add(r)
			}
			return f
		}, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				s := v.build()
				per = float64(testkit.HeapInUse()-before) / float64(cmp.Or(v.members, n))
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
