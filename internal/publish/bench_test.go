package publish

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiatjaf/eventstore/slicestore"
	"github.com/fiatjaf/khatru"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
)

// lockedStore serialises a slicestore: khatru handles every message in its
// own goroutine, and SliceStore does not lock its slice on save or query.
type lockedStore struct {
	mu sync.Mutex
	s  slicestore.SliceStore
}

func newLockedStore() *lockedStore {
	ls := &lockedStore{s: slicestore.SliceStore{MaxLimit: 1 << 30}}
	_ = ls.s.Init()
	return ls
}

func (ls *lockedStore) save(ctx context.Context, ev *nostr.Event) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.s.SaveEvent(ctx, ev)
}

func (ls *lockedStore) del(ctx context.Context, ev *nostr.Event) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.s.DeleteEvent(ctx, ev)
}

// query collects the result under the lock (SliceStore reads its slice from
// a goroutine after QueryEvents returns).
func (ls *lockedStore) query(ctx context.Context, f nostr.Filter) (chan *nostr.Event, error) {
	ls.mu.Lock()
	ch, err := ls.s.QueryEvents(ctx, f)
	var evs []*nostr.Event
	if err == nil {
		for ev := range ch {
			evs = append(evs, ev)
		}
	}
	ls.mu.Unlock()
	if err != nil {
		return nil, err
	}
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

// startKhatru serves a khatru relay backed by a lockedStore on 127.0.0.1.
func startKhatru(tb testing.TB) (string, *lockedStore) {
	tb.Helper()
	store := newLockedStore()
	rl := khatru.NewRelay()
	rl.StoreEvent = append(rl.StoreEvent, store.save)
	rl.QueryEvents = append(rl.QueryEvents, store.query)
	rl.DeleteEvent = append(rl.DeleteEvent, store.del)
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

// BenchmarkPublish measures events/s through the publisher into a local
// khatru relay (in-process, slicestore) for several window sizes. One op is
// one event; run it with a fixed count, e.g. -benchtime=10000x.
//
// Measured on the 2-core development machine (go test -bench Publish
// -benchtime=10000x -count=3, median): see the table in the package's
// report; the default Window of 200 is chosen from it.
func BenchmarkPublish(b *testing.B) {
	for _, window := range []int{1, 16, 64, 200, 500} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			evs := signedEvents(b, b.N)
			url, store := startKhatru(b)
			cfg := DefaultConfig()
			cfg.Window = window
			cfg.QueueSize = max(b.N, window)
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
			start := time.Now()
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
			elapsed := time.Since(start)
			b.StopTimer()
			if notPresent > 0 {
				b.Fatalf("%d events not stored", notPresent)
			}
			if got := store.len(); got != b.N {
				b.Fatalf("relay holds %d events, want %d", got, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}
