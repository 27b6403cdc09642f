package publish

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fiatjaf/eventstore/slicestore"
	"github.com/fiatjaf/khatru"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
)

// lockedStore is a slicestore made safe for khatru, which handles every
// message in its own goroutine (SliceStore does not lock its slice). Kind 5
// deletions live in a second slicestore: khatru looks for a deletion of every
// event it stores, and a query for kind 5 over the whole slice (SliceStore has
// no kind index) would make each save O(stored events) and the benchmark
// measure that scan.
type lockedStore struct {
	mu              sync.RWMutex
	main, deletions slicestore.SliceStore
}

func newLockedStore() *lockedStore {
	ls := &lockedStore{
		main:      slicestore.SliceStore{MaxLimit: 1 << 30},
		deletions: slicestore.SliceStore{MaxLimit: 1 << 30},
	}
	_ = ls.main.Init()
	_ = ls.deletions.Init()
	return ls
}

func (ls *lockedStore) part(kind int) *slicestore.SliceStore {
	if kind == nostr.KindDeletion {
		return &ls.deletions
	}
	return &ls.main
}

func (ls *lockedStore) save(ctx context.Context, ev *nostr.Event) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.part(ev.Kind).SaveEvent(ctx, ev)
}

func (ls *lockedStore) del(ctx context.Context, ev *nostr.Event) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.part(ev.Kind).DeleteEvent(ctx, ev)
}

// query collects the result under the read lock (SliceStore reads its slice
// from a goroutine after QueryEvents returns).
func (ls *lockedStore) query(ctx context.Context, f nostr.Filter) (chan *nostr.Event, error) {
	parts := []*slicestore.SliceStore{&ls.main, &ls.deletions}
	if len(f.Kinds) == 1 {
		parts = parts[:1]
		parts[0] = ls.part(f.Kinds[0])
	}
	var evs []*nostr.Event
	ls.mu.RLock()
	for _, part := range parts {
		ch, err := part.QueryEvents(ctx, f)
		if err != nil {
			ls.mu.RUnlock()
			return nil, err
		}
		for ev := range ch {
			evs = append(evs, ev)
		}
	}
	ls.mu.RUnlock()
	out := make(chan *nostr.Event, len(evs))
	for _, ev := range evs {
		out <- ev
	}
	close(out)
	return out, nil
}

func (ls *lockedStore) len() int {
	n := 0
	ch, _ := ls.query(context.Background(), nostr.Filter{})
	for range ch {
		n++
	}
	return n
}

// startKhatru serves a khatru relay backed by a lockedStore on 127.0.0.1;
// setup (optional) adds policies.
func startKhatru(tb testing.TB, setup ...func(*khatru.Relay)) (string, *lockedStore) {
	tb.Helper()
	store := newLockedStore()
	rl := khatru.NewRelay()
	rl.StoreEvent = append(rl.StoreEvent, store.save)
	rl.QueryEvents = append(rl.QueryEvents, store.query)
	rl.DeleteEvent = append(rl.DeleteEvent, store.del)
	for _, f := range setup {
		f(rl)
	}
	srv := httptest.NewServer(rl)
	tb.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), store
}

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
//   - khatru: into a local khatru relay (in-process, slicestore), which
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
			url, store := startKhatru(b)
			benchPublish(b, url, window, evs)
			if got := store.len(); got != b.N {
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
			benchPublish(b, f.url, window, evs)
			if n, _, _ := f.snapshot(); n != b.N {
				b.Fatalf("relay received %d EVENTs, want %d", n, b.N)
			}
		})
	}
}

func benchPublish(b *testing.B, url string, window int, evs []*nostr.Event) {
	cfg := DefaultConfig()
	cfg.Window = window
	cfg.QueueSize = max(len(evs), window)
	dial := func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, url, relay.DefaultOptions())
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
	for _, ev := range evs {
		if err := p.Submit(ctx, ev, report); err != nil {
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
