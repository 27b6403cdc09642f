package integration

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// A bulk import: the own relay holds tiedRepos hosted announcements with
// one created_at and returns 500 events per REQ. Their histories are on
// two remote relays capped at 500: A speaks NIP-77 (its sets capped at 500
// too, as khatru on its slicestore) and holds two thirds of its events in
// one second (an issue and its status per repository); B speaks only REQ
// and holds half of its events in one second. Every repository is found,
// every event arrives on the own relay, "sync caught up" is said only once
// all of it is there — never while a second is cut, as it stays on an own
// relay without NIP-77, where events of authors never seen cannot be asked
// for — and no relay is asked the same again and again.

// tiedRepos is how many repositories the bulk import holds: under -race
// fewer, still more than a page of 500 in each tied second.
var tiedRepos = func() int {
	if raceEnabled {
		return 540
	}
	return 2000
}()

// signAll builds n events with build, signed on four goroutines.
func signAll(n int, build func(i int) *nostr.Event) []*nostr.Event {
	out := make([]*nostr.Event, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				out[i] = build(i)
			}
		}()
	}
	wg.Wait()
	return out
}

func TestBulkImportTies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ownNeg   bool
		caughtUp bool
	}{
		// The own relay speaks NIP-77: its tied second is read whole.
		{"own-negentropy", true, true},
		// It does not: split by the authors seen, every announcement
		// arrives, but the second stays cut (authors never seen cannot
		// be asked for): never "caught up".
		{"own-req-only", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) { bulkImportTies(t, tc.ownNeg, tc.caughtUp) })
	}
}

func bulkImportTies(t *testing.T, ownNeg, wantCaughtUp bool) {
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), ReqCap: 500, Negentropy: ownNeg})
	a := harness.Start(t, harness.RelayOptions{Name: "A", Negentropy: true, ReqCap: 500, NegCap: 500})
	b := harness.Start(t, harness.RelayOptions{Name: "B", ReqCap: 500})
	keys := make([]*signed.Key, 40)
	for i := range keys {
		keys[i] = signed.NewKey()
	}
	now := time.Now()
	imported, tieA, tieB := now.Add(-72*time.Hour), now.Add(-48*time.Hour), now.Add(-24*time.Hour)
	n := tiedRepos
	anns := signAll(n, func(i int) *nostr.Event {
		k, d := keys[i%len(keys)], fmt.Sprintf("bulk-%d", i)
		return k.Announcement(d, signed.At(imported), signed.WithRelays(own.URL(), a.URL(), b.URL()),
			signed.WithClone("http://"+own.Addr()+"/"+k.Npub()+"/"+d+".git"))
	})
	own.Inject(anns...)
	addr := func(i int) string { return keys[i%len(keys)].RepoAddress(fmt.Sprintf("bulk-%d", i)) }
	spread := func(base time.Time, i int) time.Time { return base.Add(-time.Duration(i+1) * time.Minute) }
	// A: per repository an issue and its status in one second, a comment
	// spread out.
	issuesA := signAll(n, func(i int) *nostr.Event { return keys[(i+1)%len(keys)].Issue(addr(i), "tied", signed.At(tieA)) })
	restA := signAll(2*n, func(i int) *nostr.Event {
		k := keys[(i+2)%len(keys)]
		if i%2 == 0 {
			return k.Status(1630, issuesA[i/2], signed.At(tieA))
		}
		return k.Comment(issuesA[i/2], nil, signed.At(spread(tieA, i/2)))
	})
	// B: per repository an issue in one second, a comment spread out.
	issuesB := signAll(n, func(i int) *nostr.Event { return keys[(i+3)%len(keys)].Issue(addr(i), "tied on B", signed.At(tieB)) })
	restB := signAll(n, func(i int) *nostr.Event {
		return keys[(i+4)%len(keys)].Comment(issuesB[i], nil, signed.At(spread(tieB, i)))
	})
	a.Inject(issuesA...)
	a.Inject(restA...)
	b.Inject(issuesB...)
	b.Inject(restB...)
	want := append(append(append(append(append([]*nostr.Event{}, anns...), issuesA...), restA...), issuesB...), restB...)
	if tied := 2 * n; tied*100 < 60*(3*n) {
		t.Fatalf("A holds %d of %d events in one second, want at least 60%%", tied, 3*n)
	}

	cfg := fastConfig(own)
	cfg.Log.ProgressInterval = 200 * time.Millisecond
	// Filters of 1,000 repositories or roots: more than a page of each
	// remote's tied second falls in one.
	cfg.Sync.ValuesPerFilter = 1000
	var ownLenAtCaughtUp atomic.Int64
	ownLenAtCaughtUp.Store(-1)
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "sync caught up" && ownLenAtCaughtUp.Load() < 0 {
			ownLenAtCaughtUp.Store(int64(own.Len()))
		}
		return nil
	}))
	start := time.Now()
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	arrived := func() int {
		k := 0
		for _, ev := range want {
			if own.Has(ev.ID) {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(syncTimeout); arrived() < len(want); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			st := sc.Status()
			for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
				t.Logf("warn: %s %v", e.Message, e.ContextMap())
			}
			for name, evs := range map[string][]*nostr.Event{"announcements": anns, "issues A": issuesA, "statuses and comments A": restA, "issues B": issuesB, "comments B": restB} {
				k := 0
				for _, ev := range evs {
					if own.Has(ev.ID) {
						k++
					}
				}
				t.Logf("%s: %d of %d", name, k, len(evs))
			}
			t.Fatalf("%d of %d events on the own relay after %s; %d of %d repositories; own %+v; relays %+v",
				arrived(), len(want), syncTimeout, st.Repositories, n, st.OwnRelay, st.Relays)
		}
	}
	took := time.Since(start)
	testkit.WaitFor(t, syncTimeout, "every repository known", func() bool { return sc.Status().Repositories == n })

	if wantCaughtUp {
		testkit.WaitFor(t, syncTimeout, "a sync caught up line", func() bool { return logs.FilterMessage("sync caught up").Len() > 0 })
		if got := ownLenAtCaughtUp.Load(); got != int64(len(want)) {
			t.Fatalf("\"sync caught up\" said while the own relay held %d of %d events", got, len(want))
		}
	} else {
		testkit.WaitFor(t, syncTimeout, "a sync idle with seconds cut line", func() bool {
			return logs.FilterMessage("sync idle with seconds cut").Len() > 0
		})
		if st := sc.Status(); st.OwnRelay.TiesCut == 0 {
			t.Fatalf("the own relay's cut second is not in /status: %+v", st.OwnRelay)
		}
		if n := logs.FilterMessage("sync caught up").Len(); n > 0 {
			t.Fatalf("\"sync caught up\" said %d times while the own relay's tied second is cut", n)
		}
	}
	for _, r := range sc.Status().Relays {
		if r.TiesCut > 0 {
			t.Errorf("remote %s: %d seconds cut (%s), want none", r.URL, r.TiesCut, r.Truncation)
		}
	}

	// No loop: once everything arrived, a few seconds bring next to no
	// further requests.
	before := map[string]int{"own": own.Stats().Reqs, "A": a.Stats().Reqs, "B": b.Stats().Reqs}
	time.Sleep(2 * time.Second)
	after := map[string]int{"own": own.Stats().Reqs, "A": a.Stats().Reqs, "B": b.Stats().Reqs}
	for name := range before {
		if d := after[name] - before[name]; d > 5 {
			t.Errorf("%s received %d REQs in 2 s after the sync ended: a loop", name, d)
		}
	}
	received := map[string]uint64{}
	for _, r := range sc.Status().Relays {
		received[r.URL] = r.EventsReceived
	}
	t.Logf("%d repositories, %d events in %s; REQs own %d, A %d (NEG-OPEN %d), B %d; events received from A %d of %d, from B %d of %d",
		n, len(want), took.Round(time.Millisecond), after["own"], after["A"], a.Stats().NegOpens, after["B"],
		received[a.URL()], 3*n, received[b.URL()], 2*n)
	// B (REQ only) sends each event once but for the page that found its
	// tied second cut, which the split parts read again (one per filter
	// of cfg.Sync.ValuesPerFilter repositories), and a few at page edges:
	// a comment, tagging its issue by `E` and by `e`, comes once.
	tiedFilters := (n + cfg.Sync.ValuesPerFilter - 1) / cfg.Sync.ValuesPerFilter
	if bound := 2*n + 500*tiedFilters + 2*n*3/100; received[b.URL()] > uint64(bound) {
		t.Errorf("B sent %d events for its %d, more than %d: its held events, a cut page per tied filter and 3%%", received[b.URL()], 2*n, bound)
	}
}
