package ingest

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
)

// benchEvents returns n signed events shaped like NIP-34 traffic: a third
// patches with a 2 kB diff, the rest comments tagging a repository and a
// root event.
func benchEvents(b *testing.B, n int) []*nostr.Event {
	b.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	repo := nip34.RepoRef(pk, "bench")
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
	h := &Handler{cfg: Config{EventLimits: EventLimits{MaxEventBytes: 262144, MaxEventTags: 2000}}}
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
	published := make(chan struct{}, 1<<16)
	pub := countingPublish(published)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	for b.Loop() {
		h, err := New(Config{QueueLen: 4096, SeenMax: DefaultSeenMax, EventLimits: EventLimits{MaxEventBytes: 262144, MaxEventTags: 2000}},
			Deps{Publisher: pub, Registry: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
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

// countingPublish accepts every event and signals each on its channel.
type countingPublish chan struct{}

func (c countingPublish) Submit(_ context.Context, ev *nostr.Event, done func(publish.Result)) error {
	done(publish.Result{ID: ev.ID, Outcome: publish.Accepted})
	c <- struct{}{}
	return nil
}

func (c countingPublish) Publish(_ context.Context, ev *nostr.Event) (publish.Result, error) {
	c <- struct{}{}
	return publish.Result{ID: ev.ID, Outcome: publish.Accepted}, nil
}

// BenchmarkOnOwnRelay is the self-subscription's cost per event: "ours"
// is an event the handler already saw (our own publish coming back), the
// path that existed before; "others" is one another client posted, which
// also asks the RejectedIndex (here holding 10,000 refused events) whether
// something waited for it.
func BenchmarkOnOwnRelay(b *testing.B) {
	pk := strings.Repeat("ab", 32)
	repo := nip34.RepoRef(pk, "bench")
	mk := func(n int) []*nostr.Event {
		evs := make([]*nostr.Event, n)
		for i := range evs {
			var id [32]byte
			_, _ = rand.Read(id[:])
			evs[i] = &nostr.Event{ID: fmt.Sprintf("%x", id), PubKey: pk, Kind: 1111, CreatedAt: 1_700_000_000,
				Tags: nostr.Tags{{"a", repo}, {"E", fmt.Sprintf("%x", id)}}}
		}
		return evs
	}
	for _, mode := range []string{"ours", "others"} {
		b.Run(mode, func(b *testing.B) {
			h, _, _ := newTestHandler(b, Config{})
			h.rejected = NewRejectedIndex(DefaultRejectedConfig(), nil)
			for _, ev := range mk(10_000) {
				h.rejected.Add(ev)
			}
			evs := mk(b.N)
			if mode == "ours" {
				for _, ev := range evs {
					h.MarkPresent(ev)
				}
			}
			b.ResetTimer()
			for _, ev := range evs {
				h.OnOwnRelay(ev)
			}
		})
	}
}
