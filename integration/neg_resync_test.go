package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// resyncBytes re-syncs a set the client already holds in full from a real
// khatru relay (NIP-77 on, REQs capped at 500 like strfry), over one
// filter, first with negentropy and then by re-downloading it with paged
// REQs, and returns the wire bytes (both directions, as the relay's proxy
// counts them) of each.
func resyncBytes(tb testing.TB, evs []*nostr.Event) (negBytes, reqBytes int64) {
	tb.Helper()
	r := harness.Start(tb, harness.RelayOptions{Name: "archive", Negentropy: true, ReqCap: 500})
	r.Inject(evs...)
	items := make([]neg.Item, 0, len(evs))
	for _, ev := range evs {
		it, err := neg.ItemFromHex(ev.CreatedAt, ev.ID)
		if err != nil {
			tb.Fatal(err)
		}
		items = append(items, it)
	}
	local := neg.NewStorage(items)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := dialTB(tb, ctx, r.URL())
	filter := nostr.Filter{} // the set: everything the relay holds

	r.ResetStats()
	opts := neg.DefaultOptions()
	res, err := neg.ReconcileSplit(ctx, conn, "rs-", filter, func(nostr.Filter) (*neg.Storage, error) { return local, nil }, opts)
	if err != nil {
		tb.Fatalf("negentropy re-sync: %v", err)
	}
	if len(res.Need) != 0 || len(res.Have) != 0 {
		tb.Fatalf("identical sets: need %d, have %d", len(res.Need), len(res.Have))
	}
	st := r.Stats()
	negBytes = st.BytesIn + st.BytesOut

	r.ResetStats()
	got, err := pageAll(ctx, conn, filter, 500)
	if err != nil {
		tb.Fatalf("REQ re-download: %v", err)
	}
	if len(got) != len(evs) {
		tb.Fatalf("REQ re-download got %d of %d events", len(got), len(evs))
	}
	st = r.Stats()
	return negBytes, st.BytesIn + st.BytesOut
}

// pageAll pages filter from the relay behind conn with the sidecar's REQ
// pager and returns the ids it fetched (pages overlap by the second at
// their edge, so ids, not events, are counted).
func pageAll(ctx context.Context, conn *relay.Conn, filter nostr.Filter, pageSize int) (map[string]bool, error) {
	got := map[string]bool{}
	pager := &historic.Pager{PageSize: pageSize, EOSETimeout: 30 * time.Second}
	err := pager.Sync(ctx, conn, []nostr.Filter{filter}, 1, func(_ context.Context, in ingest.Incoming) error {
		got[in.Event.ID] = true
		return nil
	})
	return got, err
}

// dialTB connects to url for the length of the test.
func dialTB(tb testing.TB, ctx context.Context, url string) *relay.Conn {
	tb.Helper()
	conn, err := relay.Dial(ctx, url, relay.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// resyncEvents is a deterministic universe of n events with right ids and
// no signatures (a re-sync never verifies them).
func resyncEvents(n int) []*nostr.Event {
	u, err := signed.NewUniverse(signed.UniverseOptions{
		Seed: 42, Repos: max(1, n/200), Relays: []string{"ws://127.0.0.1:1", "ws://127.0.0.1:2"}, Events: n,
		SkipSignatures: true,
	})
	if err != nil {
		panic(err)
	}
	return u.Events
}

// benchResyncEvents is resyncEvents of GRASP_BENCH_EVENTS (default 100,000).
var benchResyncEvents = sync.OnceValue(func() []*nostr.Event {
	n, err := strconv.Atoi(os.Getenv("GRASP_BENCH_EVENTS"))
	if err != nil || n <= 0 {
		n = 100_000
	}
	return resyncEvents(n)
})

// TestNegentropyResyncBytes: re-syncing a set both sides already hold
// costs at most 1% of the bytes of downloading it again (issue 5).
func TestNegentropyResyncBytes(t *testing.T) {
	n := scaled(20_000, 5_000)
	evs := resyncEvents(n)
	negBytes, reqBytes := resyncBytes(t, evs)
	ratio := float64(negBytes) / float64(reqBytes)
	t.Logf("%d events: negentropy %d bytes, REQ re-download %d bytes (%.4f%%)", len(evs), negBytes, reqBytes, 100*ratio)
	if ratio > 0.01 {
		t.Fatalf("negentropy re-sync cost %.2f%% of a REQ re-download, want <= 1%%", 100*ratio)
	}
}

// BenchmarkNegentropyResync100k is TestNegentropyResyncBytes on 100,000
// events (GRASP_BENCH_EVENTS scales it): bytes of a negentropy re-sync of an
// already-synced set against a full REQ re-download of it.
func BenchmarkNegentropyResync100k(b *testing.B) {
	evs := benchResyncEvents()
	for b.Loop() {
		negBytes, reqBytes := resyncBytes(b, evs)
		b.ReportMetric(float64(negBytes), "neg-bytes")
		b.ReportMetric(float64(reqBytes), "req-bytes")
		b.ReportMetric(100*float64(negBytes)/float64(reqBytes), "neg-%-of-req")
	}
}

// TestPagerGoesPastSaturatedSecond: a second holding more events of one
// kind than the relay returns per REQ is reported, and the paging still
// fetches everything older.
func TestPagerGoesPastSaturatedSecond(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "capped", ReqCap: 50})
	alice := signed.NewKey()
	repo := alice.RepoAddress("r")
	crowded := time.Now().Add(-time.Hour)
	var older []*nostr.Event
	for i := range 60 {
		r.Inject(alice.Issue(repo, fmt.Sprintf("same second %d", i), signed.At(crowded)))
		ev := alice.Issue(repo, "older", signed.At(crowded.Add(-time.Duration(i+1)*time.Minute)))
		r.Inject(ev)
		older = append(older, ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := pageAll(ctx, dialTB(t, ctx, r.URL()), nostr.Filter{Kinds: []int{1621}}, 50)
	if !errors.Is(err, historic.ErrSaturatedSecond) {
		t.Fatalf("err = %v, want ErrSaturatedSecond (got %d events)", err, len(got))
	}
	for _, ev := range older {
		if !got[ev.ID] {
			t.Fatalf("an event older than the saturated second was not fetched (%d of %d older events)", countIn(got, older), len(older))
		}
	}
}

func countIn(got map[string]bool, evs []*nostr.Event) int {
	n := 0
	for _, ev := range evs {
		if got[ev.ID] {
			n++
		}
	}
	return n
}

// TestPagerWithOldDatedLiveEvents: while the pager pages a relay, events
// with old created_at are published to it. khatru (and the harness) deliver
// them live to the page's subscription, mixed into the stored results; they
// must not make the pager step over stored events.
func TestPagerWithOldDatedLiveEvents(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "busy", ReqCap: 50})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := alice.RepoAddress("r")
	base := time.Now().Add(-48 * time.Hour)
	var stored []*nostr.Event
	for i := range 400 {
		ev := alice.Issue(repo, fmt.Sprintf("stored %d", i), signed.At(base.Add(time.Duration(i)*time.Minute)))
		stored = append(stored, ev)
	}
	r.Inject(stored...)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan struct{})
	go func() { // old-dated events, published while the pager runs
		defer close(pubDone)
		for i := 0; pubCtx.Err() == nil; i++ {
			at := base.Add(time.Duration(i%400)*time.Minute - 30*time.Second)
			ev := bob.Issue(repo, fmt.Sprintf("late %d", i), signed.At(at))
			if err := r.Publish(pubCtx, ev); err != nil && pubCtx.Err() == nil {
				t.Errorf("publish: %v", err)
				return
			}
		}
	}()
	got, err := pageAll(ctx, dialTB(t, ctx, r.URL()), nostr.Filter{Kinds: []int{1621}}, 50)
	stopPub()
	<-pubDone
	if err != nil {
		t.Fatal(err)
	}
	if n := countIn(got, stored); n != len(stored) {
		t.Fatalf("the pager fetched %d of %d stored events", n, len(stored))
	}
}
