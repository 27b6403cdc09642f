package reposync

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestJobOnEndedConnectionIsNoFailedBatch: a historic job that fails
// because its connection ended (a relay closing it for a message too big,
// a dropped socket) does not fail its batch, whichever of the job's report
// and the disconnect reaches the Run goroutine first: no retry waits for
// the historic retry backoff, and the reconnect asks the batch's items again
// at once (TestWildLearnedLimits took 30 s, and could run out of time, when
// the job's report came first).
func TestJobOnEndedConnectionIsNoFailedBatch(t *testing.T) {
	h := newHistoricEnv(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "ended"})
	conn, err := relay.Dial(context.Background(), remote.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	<-conn.Done()
	h.r.conn = conn
	h.hs.set(true) // the syncer fails, as on a closed connection

	items := repoindex.NewItems()
	items.Repos.Add(h.ref)
	h.e.sched.startBatch(h.r, items, nip34.Layer2([]string{h.ref}, 100, nil), false)
	// The jobs report before the disconnect does.
	for h.e.historicJobs > 0 {
		select {
		case fn := <-h.e.inbox:
			fn()
		case <-time.After(10 * time.Second):
			t.Fatal("no historic job reported")
		}
	}
	if len(h.r.failed) != 0 || h.r.HistoricFailed {
		t.Fatalf("a job on an ended connection failed its batch: %d retries waiting, status %v", len(h.r.failed), h.r.Status)
	}
	if h.r.Confirmed.Repos.Has(h.ref) {
		t.Fatal("the repository is confirmed though its history was never read")
	}

	// The disconnect, then a quick reconnect: the repository's history is
	// asked again (without since), not left to a retry a minute away.
	h.e.onDisconnected(testRelay, h.r.gen, errors.New("closed: message too big"))
	h.clk.Advance(time.Second)
	h.hs.set(false)
	h.r.gen, h.r.Status, h.r.live = 2, repoindex.Connecting, map[string]int{} // as onDialed does
	before := h.hs.count()
	h.e.connectOrReconnect(h.r)
	h.drain(t)
	h.eoses(t)
	if !slices.ContainsFunc(h.callsSince(before), func(f nostr.Filter) bool {
		return f.Since == nil && slices.Contains(f.Tags["a"], h.ref)
	}) {
		t.Fatalf("the reconnect asked %v, want the repository's history", h.callsSince(before))
	}
	if h.r.Status != repoindex.Connected || !h.r.Confirmed.Repos.Has(h.ref) {
		t.Fatalf("after the reconnect: %v, confirmed %v", h.r.Status, h.r.Confirmed.Repos.Has(h.ref))
	}
}
