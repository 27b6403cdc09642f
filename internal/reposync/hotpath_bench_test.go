package reposync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// benchEvents returns n signed events shaped like NIP-34 traffic: a third
// patches with a 2 kB diff, the rest comments tagging a repository and a
// root event.
func benchEvents(b *testing.B, n int) []*nostr.Event {
	b.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	repo := RepoRef(pk, "bench")
	evs := make([]*nostr.Event, n)
	for i := range evs {
		ev := &nostr.Event{CreatedAt: nostr.Timestamp(1_700_000_000 + i), Tags: nostr.Tags{{"a", repo}}}
		if i%3 == 0 {
			ev.Kind = 1617
			ev.Content = "diff --git a/x b/x\n" + strings.Repeat("+ line of a generated patch\n", 70)
			ev.Tags = append(ev.Tags, nostr.Tag{"r", fmt.Sprintf("%040x", i)}, nostr.Tag{"t", "root"})
		} else {
			ev.Kind = 1111
			ev.Content = fmt.Sprintf("comment %d on the patch", i)
			ev.Tags = append(ev.Tags, nostr.Tag{"E", fmt.Sprintf("%064x", i/3)}, nostr.Tag{"K", "1617"}, nostr.Tag{"P", pk})
		}
		if err := ev.Sign(sk); err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	return evs
}

// BenchmarkVerifyEvent is the handler's validation of one event: id hash
// and Schnorr signature. Compare the pure-Go default with
// `go test -tags libsecp256k1` (go-nostr's cgo binding).
func BenchmarkVerifyEvent(b *testing.B) {
	evs := benchEvents(b, 256)
	h := &Handler{cfg: HandlerConfig{MaxEventBytes: 262144, MaxEventTags: 2000}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	start := threadCPU()
	i := 0
	for b.Loop() {
		ev := evs[i%len(evs)]
		i++
		if reason, err := h.validate(Incoming{Event: ev, Size: 2500}); err != nil {
			b.Fatalf("%s: %v", reason, err)
		}
	}
	b.ReportMetric(float64((threadCPU()-start).Nanoseconds())/1e3/float64(i), "cpu-µs/op")
}

// BenchmarkDedupe is the seen-set check and mark of one event id, from
// GOMAXPROCS goroutines at once: half the ids are new, half repeat (the
// same event from a second relay).
func BenchmarkDedupe(b *testing.B) {
	ids := make([][32]byte, 1<<16)
	for i := range ids {
		rand.Read(ids[i][:])
	}
	s := newSeenSet(2_000_000, 0, nil)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			id := ids[i&(len(ids)-1)]
			i++
			if !s.Has(id) {
				s.Mark(id)
			}
		}
	})
}

// BenchmarkHandler measures events per second through the shared handler
// (decode id, dedupe, verify, route) with a publisher that accepts at once;
// every event arrives from two relays, as when repositories list several.
func BenchmarkHandler(b *testing.B) {
	evs := benchEvents(b, 2048)
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	published := make(chan struct{}, 1<<16)
	publish := func(_ context.Context, ev *nostr.Event, done func(Outcome, string)) error {
		done(Accepted, "")
		published <- struct{}{}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	for b.Loop() {
		h := NewHandler(HandlerConfig{MaxEventBytes: 262144, MaxEventTags: 2000}, publish, nil,
			NewRejectedIndex(RejectedConfig{}, nil), m, zap.NewNop())
		hctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { h.Run(hctx); close(done) }()
		for _, ev := range evs {
			for _, relay := range []string{"wss://a", "wss://b"} {
				if err := h.Handle(ctx, Incoming{Event: ev, Size: 2500, Relay: relay}); err != nil {
					b.Fatal(err)
				}
			}
		}
		for range evs {
			<-published
		}
		stop()
		<-done
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkTrackedRepoMemory reports the heap held per tracked repository
// by the sync indexes with 10,000 repositories (5 root events each) spread
// over 100 relays, half of it confirmed.
func BenchmarkTrackedRepoMemory(b *testing.B) {
	const repos, relayCount = 10000, 100
	var perRepo float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		idx, relays := trackedIndexes(repos, relayCount)
		targets := deriveRelayTargets(idx, nil)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRepo = float64(after.HeapAlloc-before.HeapAlloc) / repos
		runtime.KeepAlive(idx)
		runtime.KeepAlive(relays)
		runtime.KeepAlive(targets)
	}
	b.ReportMetric(perRepo, "bytes/repo")
}

// trackedIndexes builds a RepoSyncIndex of n repositories, each listing 3
// of relayCount relays and 5 root events, and relay states with half of
// each relay's targets confirmed.
func trackedIndexes(n, relayCount int) (RepoSyncIndex, map[string]*RelayState) {
	repos := RepoSyncIndex{}
	relays := map[string]*RelayState{}
	for r := 0; r < relayCount; r++ {
		relays[fmt.Sprintf("wss://relay%03d.example", r)] = &RelayState{Status: Connected, Confirmed: newItems()}
	}
	root := make([]byte, 32)
	for i := 0; i < n; i++ {
		need := &RepoNeeds{Relays: set{}, Roots: set{}}
		for j := 0; j < 3; j++ {
			need.Relays.add(fmt.Sprintf("wss://relay%03d.example", (i*7+j*13)%relayCount))
		}
		for j := 0; j < 5; j++ {
			rand.Read(root)
			need.Roots.add(hex.EncodeToString(root))
		}
		pk := make([]byte, 32)
		rand.Read(pk)
		repos[RepoRef(hex.EncodeToString(pk), fmt.Sprintf("repo-%d", i))] = need
	}
	for url, t := range deriveRelayTargets(repos, nil) {
		i := 0
		for ref := range t.Repos {
			if i%2 == 0 {
				relays[url].Confirmed.Repos.add(ref)
			}
			i++
		}
		i = 0
		for root := range t.Roots {
			if i%2 == 0 {
				relays[url].Confirmed.Roots.add(root)
			}
			i++
		}
	}
	return repos, relays
}
