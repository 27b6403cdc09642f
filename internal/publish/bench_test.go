package publish

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
)

var (
	benchMu     sync.Mutex
	benchEvents []*nostr.Event
)

// signedEvents returns n distinct signed events, signing (once per process)
// only those not made yet.
func signedEvents(tb testing.TB, n int) []*nostr.Event {
	benchMu.Lock()
	defer benchMu.Unlock()
	if len(benchEvents) < n {
		benchEvents = append(benchEvents, makeEvents(tb, n-len(benchEvents))...)
	}
	return benchEvents[:n]
}

// BenchmarkPublish measures events/s through the publisher for several
// window sizes (one op is one event; run it with a fixed count, e.g.
// -benchtime=10000x):
//
//   - khatru: into a local khatru relay (in-process, harness.Store), which
//     checks every signature: the real own-relay case on loopback.
//   - fake1ms: into the fake relay answering each EVENT after 1ms without
//     checking anything: the publisher's own ceiling when the relay is a
//     round trip away (docker bridge, another host).
//
// Figures and the choice of the default Window are in the package doc.
func BenchmarkPublish(b *testing.B) {
	windows := []int{1, 16, 64, 200, 500}
	for _, window := range windows {
		b.Run(fmt.Sprintf("khatru/window=%d", window), func(b *testing.B) {
			evs := signedEvents(b, b.N)
			store := harness.NewStore()
			url := harness.StartKhatru(b, store, nil)
			benchPublish(b, url, coalescing(), window, evs, nil)
			if got := store.Len(); got != b.N {
				b.Fatalf("relay holds %d events, want %d", got, b.N)
			}
		})
	}
	for _, window := range windows {
		b.Run(fmt.Sprintf("fake1ms/window=%d", window), func(b *testing.B) {
			evs := signedEvents(b, b.N)
			f := newFakeRelay(b)
			f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
				id := ev.ID
				time.AfterFunc(time.Millisecond, func() { c.answer(id, true, "") })
				return reply{silent: true}
			})
			benchPublish(b, f.url, coalescing(), window, evs, nil)
			if n, _, _ := f.snapshot(); n != b.N {
				b.Fatalf("relay received %d EVENTs, want %d", n, b.N)
			}
		})
	}
}

// BenchmarkPublishRaw is the forwarding path's publisher cost per event:
// events submitted as the bytes they arrived in (SubmitRaw) into the fake
// relay answering each EVENT at once, window 200 (the default), with
// the publisher's bursts in one write (coalesce=true, as the sidecar
// dials the own relay) and one write per EVENT; one op is one event. cpu-µs/event counts the whole process, the fake relay's
// decoding included; allocs/op the publisher's and the relay client's
// allocations (and the fake relay's).
func BenchmarkPublishRaw(b *testing.B) {
	for _, coalesce := range []bool{true, false} {
		b.Run(fmt.Sprintf("coalesce=%v", coalesce), func(b *testing.B) {
			evs := signedEvents(b, b.N)
			raws := make([][]byte, len(evs))
			for i, ev := range evs {
				raw, err := ev.MarshalJSON()
				if err != nil {
					b.Fatal(err)
				}
				raws[i] = raw
			}
			f := newFakeRelay(b)
			opts := relay.DefaultOptions()
			opts.CoalesceWrites = coalesce
			b.ReportAllocs()
			benchPublish(b, f.url, opts, DefaultConfig().Window, evs, raws)
			if n, _, _ := f.snapshot(); n != b.N {
				b.Fatalf("relay received %d EVENTs, want %d", n, b.N)
			}
		})
	}
}

// benchPublish submits evs (as raws when set) and waits for every outcome.
func benchPublish(b *testing.B, url string, opts relay.Options, window int, evs []*nostr.Event, raws [][]byte) {
	cfg := DefaultConfig()
	cfg.Window = window
	cfg.QueueSize = max(len(evs), window)
	dial := func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, url, opts)
	}
	p, err := New(cfg, dial, nil, zap.NewNop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	var mu sync.Mutex
	notPresent := 0
	report := func(r Result) {
		if !r.Present() {
			mu.Lock()
			notPresent++
			mu.Unlock()
		}
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for i, ev := range evs {
		var raw []byte
		if raws != nil {
			raw = raws[i]
		}
		if err := p.SubmitRaw(ctx, ev, raw, report); err != nil {
			b.Fatal(err)
		}
	}
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer fcancel()
	if err := p.Flush(fctx); err != nil {
		b.Fatal(err)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if notPresent > 0 {
		b.Fatalf("%d events not stored", notPresent)
	}
	b.ReportMetric(float64(len(evs))/elapsed.Seconds(), "events/s")
	// CPU time of the whole process (publisher and in-process relay) per
	// event: unlike events/s it hardly moves when other processes load
	// the machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(evs)), "cpu-µs/event")
}

// processCPU returns the user+system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
