package localindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// randomFilter builds a filter from values that occur in events (and some
// that do not).
func randomFilter(r *rand.Rand, events []*nostr.Event) nostr.Filter {
	pick := func() *nostr.Event { return events[r.IntN(len(events))] }
	var f nostr.Filter
	if r.IntN(3) == 0 {
		f.Kinds = []int{pick().Kind, 1630 + r.IntN(4)}
	}
	if r.IntN(4) == 0 {
		f.Authors = []string{pick().PubKey, randHex(r)}
	}
	if r.IntN(5) == 0 {
		f.IDs = []string{pick().ID, pick().ID, randHex(r)}
	}
	if r.IntN(3) == 0 {
		s := 1_700_000_000 + r.IntN(10_000_000)
		f.Since = ts(s)
		if r.IntN(2) == 0 {
			f.Until = ts(s + r.IntN(5_000_000))
		}
	}
	if r.IntN(2) == 0 {
		f.Tags = nostr.TagMap{}
		for range 1 + r.IntN(2) {
			name := string(IndexedTags[r.IntN(len(IndexedTags))])
			var vals []string
			for range 1 + r.IntN(100) {
				ev := pick()
				for _, tag := range ev.Tags {
					if len(tag) >= 2 && tag[0] == name {
						vals = append(vals, tag[1])
					}
				}
			}
			vals = append(vals, "not-a-value", randHex(r))
			f.Tags[name] = vals
		}
	}
	return f
}

func TestAppendMatchingAgreesWithFilterMatches(t *testing.T) {
	events := genEvents(1, 5000, 100, 30)
	x := mustNew(t, DefaultOptions())
	for _, ev := range events {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(2, 2))
	fixed := []nostr.Filter{
		{},
		{Kinds: []int{30617, 30618}},
		{Kinds: []int{}},
		{Authors: []string{}},
		{IDs: []string{}},
		{Tags: nostr.TagMap{"e": {}}},
		{Tags: nostr.TagMap{"e": nil}},
		{Since: ts(1_705_000_000), Until: ts(1_704_000_000)},
	}
	nonEmpty := 0
	for i := range 150 {
		f := randomFilter(r, events)
		if i < len(fixed) {
			f = fixed[i]
		}
		got, err := x.AppendMatching(nil, f)
		if err != nil {
			t.Fatalf("filter %v: %v", f, err)
		}
		want := bruteForce(events, f)
		if !slices.Equal(itemIDs(got), want) {
			t.Fatalf("filter %v: %d ids, want %d", f, len(got), len(want))
		}
		if len(want) > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < 50 {
		t.Errorf("only %d of 150 filters matched anything: the test is too weak", nonEmpty)
	}
}

func TestRemoveKeepsIndexConsistent(t *testing.T) {
	events := genEvents(3, 12_000, 50, 20)
	x := mustNew(t, DefaultOptions())
	for _, ev := range events {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	// Remove two thirds (forcing tag arena compaction and slot reuse), then
	// add some back.
	r := rand.New(rand.NewPCG(4, 4))
	var kept, removed []*nostr.Event
	for _, ev := range events {
		if r.IntN(3) > 0 {
			if !x.Remove(ev.ID) {
				t.Fatalf("Remove(%s) = false", ev.ID)
			}
			removed = append(removed, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	if x.Remove(removed[0].ID) {
		t.Error("second Remove of the same id = true")
	}
	for _, ev := range removed[:1000] {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, ev)
	}
	if got, want := x.Len(), len(kept); got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
	for _, ev := range kept[:100] {
		if !x.Has(ev.ID) {
			t.Fatalf("Has(%s) = false for a kept event", ev.ID)
		}
	}
	for _, ev := range removed[1000:1100] {
		if x.Has(ev.ID) {
			t.Fatalf("Has(%s) = true for a removed event", ev.ID)
		}
	}
	for range 50 {
		f := randomFilter(r, events)
		got, err := x.AppendMatching(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteForce(kept, f); !slices.Equal(itemIDs(got), want) {
			t.Fatalf("after removals, filter %v: %d ids, want %d", f, len(got), len(want))
		}
	}
	// Interned values of removed events are released.
	for _, ev := range kept {
		x.Remove(ev.ID)
	}
	if x.authors.len() != 0 || x.hexVals.len() != 0 || x.strVals.len() != 0 {
		t.Errorf("interned values left after removing everything: authors %d, hex %d, strings %d",
			x.authors.len(), x.hexVals.len(), x.strVals.len())
	}
}

func TestCannotAnswer(t *testing.T) {
	x := mustNew(t, DefaultOptions())
	for _, f := range []nostr.Filter{
		{Tags: nostr.TagMap{"p": {"x"}}},
		{Tags: nostr.TagMap{"t": {"root"}}},
		{Tags: nostr.TagMap{"ab": {"x"}}},
		{Search: "hello"},
	} {
		if _, err := x.AppendMatching(nil, f); !errors.Is(err, ErrCannotAnswer) {
			t.Errorf("filter %v: err = %v, want ErrCannotAnswer", f, err)
		}
		if _, err := x.Storage(f); !errors.Is(err, ErrCannotAnswer) {
			t.Errorf("Storage(%v): err = %v, want ErrCannotAnswer", f, err)
		}
	}
}

func TestAddRejectsInvalid(t *testing.T) {
	x := mustNew(t, DefaultOptions())
	ok := genEvents(5, 1, 1, 1)[0]
	bad := []nostr.Event{
		{ID: "abc", PubKey: ok.PubKey},
		{ID: strings.ToUpper(ok.ID), PubKey: ok.PubKey},
		{ID: ok.ID, PubKey: "zz"},
		{ID: ok.ID, PubKey: ok.PubKey, Kind: -1},
	}
	for i := range bad {
		if err := x.Add(&bad[i]); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("case %d: err = %v, want ErrInvalidEvent", i, err)
		}
	}
	if x.Len() != 0 {
		t.Errorf("Len() = %d after invalid adds", x.Len())
	}
	if err := x.Add(ok); err != nil {
		t.Fatal(err)
	}
	if err := x.Add(ok); err != nil {
		t.Fatalf("duplicate Add: %v", err)
	}
	if x.Len() != 1 {
		t.Errorf("Len() = %d after duplicate add, want 1", x.Len())
	}
}

func TestFullAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	opt := DefaultOptions()
	opt.MaxEvents = 10
	x, err := New(opt, reg)
	if err != nil {
		t.Fatal(err)
	}
	events := genEvents(6, 12, 2, 2)
	for i, ev := range events {
		err := x.Add(ev)
		if i < 10 && err != nil {
			t.Fatalf("Add #%d: %v", i, err)
		}
		if i >= 10 && !errors.Is(err, ErrFull) {
			t.Fatalf("Add #%d: err = %v, want ErrFull", i, err)
		}
	}
	if !x.Full() {
		t.Error("Full() = false at capacity")
	}
	if got := testkit.Metric(t, reg, "ngit_sync_localindex_full", nil); got != 1 {
		t.Errorf("full gauge = %g, want 1", got)
	}
	if got := testkit.Metric(t, reg, "ngit_sync_localindex_dropped_total", nil); got != 2 {
		t.Errorf("dropped = %g, want 2", got)
	}
	if got := testkit.Metric(t, reg, "ngit_sync_localindex_events", nil); got != 10 {
		t.Errorf("events gauge = %g, want 10", got)
	}
	x.Remove(events[0].ID)
	if x.Full() || testkit.Metric(t, reg, "ngit_sync_localindex_full", nil) != 0 {
		t.Error("still full after a removal")
	}
	if _, err := New(opt, reg); err == nil {
		t.Error("registering twice succeeded")
	}
	if _, err := New(Options{}, nil); err == nil {
		t.Error("zero Options accepted")
	}
}

func TestTruncatedTagsMatchEveryTagCondition(t *testing.T) {
	opt := DefaultOptions()
	opt.MaxTagsPerEvent = 2
	x := mustNew(t, opt)
	ev := genEvents(7, 1, 1, 1)[0]
	ev.Tags = nostr.Tags{{"e", "1"}, {"e", "2"}, {"e", "3"}}
	if err := x.Add(ev); err != nil {
		t.Fatal(err)
	}
	got, err := x.AppendMatching(nil, nostr.Filter{Tags: nostr.TagMap{"e": {"3"}}})
	if err != nil || len(got) != 1 {
		t.Fatalf("got %d items (err %v), want the truncated event", len(got), err)
	}
	got, _ = x.AppendMatching(nil, nostr.Filter{Tags: nostr.TagMap{"e": {"3"}}, Kinds: []int{ev.Kind + 1}})
	if len(got) != 0 {
		t.Errorf("non-tag conditions still apply to truncated events; got %d items", len(got))
	}
}

func TestStorageUnionsSources(t *testing.T) {
	events := genEvents(8, 500, 10, 5)
	x := mustNew(t, DefaultOptions())
	for _, ev := range events[:400] {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	// Purgatory holds 50 events, 10 of them also in the index.
	purgatory := SourceFunc(func(dst []neg.Item, f nostr.Filter) []neg.Item {
		for _, ev := range events[390:440] {
			it, _ := neg.ItemFromHex(ev.CreatedAt, ev.ID)
			dst = append(dst, it)
		}
		return dst
	})
	s, err := x.Storage(nostr.Filter{}, purgatory)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Size(), 440; got != want {
		t.Errorf("Size() = %d, want %d", got, want)
	}
	local := x.LocalFunc(purgatory)
	st, err := local(nostr.Filter{Kinds: []int{30617}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 50 {
		t.Errorf("LocalFunc storage has %d items, want the 50 purgatory items and more", st.Size())
	}
	if _, err := x.LocalFunc()(nostr.Filter{Tags: nostr.TagMap{"p": {"x"}}}); !errors.Is(err, ErrCannotAnswer) {
		t.Errorf("LocalFunc with an unsupported filter: err = %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	events := genEvents(9, 4000, 20, 10)
	x := mustNew(t, DefaultOptions())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(events); i += 4 {
				if err := x.Add(events[i]); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					x.Remove(events[i].ID)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			if _, err := x.AppendMatching(nil, nostr.Filter{Kinds: []int{1111}}); err != nil {
				t.Error(err)
				return
			}
			x.Has(events[0].ID)
			x.Len()
		}
	}()
	wg.Wait()
	want := 0
	for i := range events {
		if i%7 != 0 {
			want++
		}
	}
	if got := x.Len(); got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
}

func TestKeyTableAgainstMap(t *testing.T) {
	var keys []event.ID
	kt := newKeyTable(func(i uint32) *event.ID { return &keys[i] })
	present := map[event.ID]uint32{}
	r := rand.New(rand.NewPCG(10, 10))
	for i := range 20_000 {
		if r.IntN(3) == 0 && len(present) > 0 {
			// remove a random present key
			for k := range present {
				if !kt.remove(&k) {
					t.Fatalf("remove of a present key failed")
				}
				delete(present, k)
				break
			}
			continue
		}
		var k event.ID
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(r.IntN(4)) // few distinct bits: long probe runs
		if _, ok := present[k]; ok {
			continue
		}
		keys = append(keys, k)
		kt.insert(uint32(len(keys) - 1))
		present[k] = uint32(len(keys) - 1)
	}
	for k, idx := range present {
		if got, ok := kt.find(&k); !ok || got != idx {
			t.Fatalf("find = %d,%v want %d", got, ok, idx)
		}
	}
	if kt.n != len(present) {
		t.Errorf("n = %d, want %d", kt.n, len(present))
	}
	var absent event.ID
	absent[31] = 0xff
	if _, ok := kt.find(&absent); ok {
		t.Error("found an absent key")
	}
}

// measureBytesPerEvent fills an index with n events and returns the heap
// growth per event (events themselves generated beforehand and kept alive).
func measureBytesPerEvent(t testing.TB, n int) float64 {
	events := genEvents(11, n, n/100, n/300)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := mustNew(t, DefaultOptions())
	for _, ev := range events {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(events)
	runtime.KeepAlive(x)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestBytesPerEvent checks the memory goal: at most 150 bytes per event at
// 100,000 events.
func TestBytesPerEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement skipped in -short mode")
	}
	bpe := measureBytesPerEvent(t, 100_000)
	t.Logf("%.1f bytes per event at 100,000 events", bpe)
	if bpe > 150 {
		t.Errorf("%.1f bytes per event, goal 150", bpe)
	}
}

func BenchmarkFill100k(b *testing.B) {
	events := genEvents(12, 100_000, 1000, 300)
	for b.Loop() {
		x := mustNew(b, DefaultOptions())
		for _, ev := range events {
			if err := x.Add(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(measureBytesPerEvent(b, 100_000), "bytes/event")
}

func BenchmarkAppendMatching100k(b *testing.B) {
	events := genEvents(13, 100_000, 1000, 300)
	x := mustNew(b, DefaultOptions())
	for _, ev := range events {
		if err := x.Add(ev); err != nil {
			b.Fatal(err)
		}
	}
	var addrs []string
	for i := range 100 {
		addrs = append(addrs, fmt.Sprintf("30617:%s:repo-%d", events[0].PubKey, i))
	}
	b.Run("storage-all", func(b *testing.B) {
		for b.Loop() {
			if _, err := x.Storage(nostr.Filter{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name string
		f    nostr.Filter
	}{
		{"kinds", nostr.Filter{Kinds: []int{30617, 30618}}},
		{"a-100-values", nostr.Filter{Tags: nostr.TagMap{"a": addrs}}},
		{"all", nostr.Filter{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]neg.Item, 0, 100_000)
			for b.Loop() {
				var err error
				if buf, err = x.AppendMatching(buf[:0], tc.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeyTableFind looks up random 32-byte keys in a table of 1,000,000
// (the ids of a large own relay): present ones (an event indexed again, a
// dedupe mark) and absent ones (a new event, an id a reconciliation found).
func BenchmarkKeyTableFind(b *testing.B) {
	const n = 1_000_000
	r := rand.New(rand.NewPCG(21, 21))
	keys := make([]event.ID, n)
	absent := make([]event.ID, n)
	kt := newKeyTable(func(i uint32) *event.ID { return &keys[i] })
	for i := range keys {
		for j := 0; j < 32; j += 8 {
			binary.LittleEndian.PutUint64(keys[i][j:], r.Uint64())
			binary.LittleEndian.PutUint64(absent[i][j:], r.Uint64())
		}
		kt.insert(uint32(i))
	}
	b.Run("present", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := kt.find(&keys[i]); !ok {
				b.Fatal("not found")
			}
			i = (i + 7919) % n
		}
	})
	b.Run("absent", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := kt.find(&absent[i]); ok {
				b.Fatal("found")
			}
			i = (i + 7919) % n
		}
	})
}
