package reposync

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// quickReconnect confirms h's repository, drops the connection for a
// minute and reconnects: the since subscriptions are open, none answered.
func (h *historicEnv) quickReconnect(t *testing.T) nostr.Timestamp {
	t.Helper()
	h.batch(t)
	h.e.onDisconnected(testRelay, h.r.gen, errors.New("connection reset"))
	h.clk.Advance(time.Minute)
	h.r.gen, h.r.Status, h.r.live = 2, repoindex.Connecting, map[string]int{} // as onDialed does
	h.e.connectOrReconnect(h.r)
	return nostr.Timestamp(h.clk.Now().Add(-time.Minute - h.e.cfg.SinceBuffer).Unix())
}

// layer2Sub is the since subscription asking the repository's #a filter.
func (h *historicEnv) layer2Sub(t *testing.T) (string, *sinceSub) {
	t.Helper()
	for id, cu := range h.r.since {
		for _, f := range cu.filters {
			if len(f.Tags["a"]) > 0 {
				return id, cu
			}
		}
	}
	t.Fatal("no since subscription asks the repository's #a")
	return "", nil
}

// TestSinceSubscriptionPagedPastCap: a since subscription's filter whose
// stored answer reached the relay's cap — the limit asked, a common cap
// (ngit-relay's 250), or the relay's announced max_limit — is paged on with
// the REQ pager below the oldest event it got, keeping since; one short of
// the limit is complete and costs no REQ. The batch ends with its pages.
func TestSinceSubscriptionPagedPastCap(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxLimit int
		got      int
		paged    bool
	}{
		{"reached the limit", 0, 500, true},
		{"one short of the limit", 0, 499, false},
		{"common cap below the limit", 0, 250, true},
		{"announced max_limit", 300, 300, true},
		{"under the announced max_limit", 300, 299, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHistoricEnv(t)
			if c.maxLimit > 0 {
				h.e.d.Health.SetLimits(testRelay, relay.Limits{MaxLimit: c.maxLimit})
			}
			since := h.quickReconnect(t)
			before := h.hs.count()
			id, cu := h.layer2Sub(t)
			cnt := truncation.NewCapCount(cu.filters, func() bool { return false }, h.e.clock, time.Hour)
			for i := range c.got {
				cnt.Add(&nostr.Event{Kind: nip34.KindIssue, CreatedAt: since + 1000 - nostr.Timestamp(i), Tags: nostr.Tags{{"a", h.ref}}})
			}
			rest := cnt.Rest(func(n, limit int) bool { return h.e.pager.ReachedCap(testRelay, n, limit) })
			for oid, o := range h.r.since {
				if oid != id {
					h.e.subs.onSinceEOSE(testRelay, h.r.gen, oid, o, nil)
				}
			}
			h.e.subs.onSinceEOSE(testRelay, h.r.gen, id, cu, rest)
			h.drain(t)
			asked := h.callsSince(before)
			if !c.paged {
				if len(asked) != 0 {
					t.Fatalf("paged %v, want nothing", asked)
				}
			} else {
				wantUntil := since + 1000 - nostr.Timestamp(c.got-1)
				if len(asked) != 1 || asked[0].Until == nil || *asked[0].Until != wantUntil ||
					asked[0].Since == nil || *asked[0].Since != since || len(asked[0].Tags["a"]) == 0 {
					t.Fatalf("paged %v, want the #a filter with since %d and until %d", asked, since, wantUntil)
				}
			}
			if len(h.e.pending[testRelay]) != 0 || h.r.Status != repoindex.Connected {
				t.Fatalf("after EOSE: %d pending batches, %v", len(h.e.pending[testRelay]), h.r.Status)
			}
		})
	}
}

// TestSinceSubscriptionClosedByUs: a consolidation closing the since
// subscriptions before their EOSE does not lose their catch-up: their
// filters are paged with the REQ pager as part of the same batch.
func TestSinceSubscriptionClosedByUs(t *testing.T) {
	h := newHistoricEnv(t)
	since := h.quickReconnect(t)
	before := h.hs.count()
	h.e.subs.consolidate(h.r)
	if len(h.r.since) != 0 || len(h.e.pending[testRelay]) != 1 {
		t.Fatalf("after the consolidation: %d since subscriptions, %d pending batches", len(h.r.since), len(h.e.pending[testRelay]))
	}
	h.e.sched.startJobs(h.r)
	h.drain(t)
	asked := h.callsSince(before)
	if len(asked) < 2 {
		t.Fatalf("paged %v, want layer 1 and layer 2 of the catch-up", asked)
	}
	for _, f := range asked {
		if f.Since == nil || *f.Since != since {
			t.Fatalf("paged %v: since %v, want %d", f, f.Since, since)
		}
	}
	if len(h.e.pending[testRelay]) != 0 || h.r.Status != repoindex.Connected {
		t.Fatalf("after the pages: %d pending batches, %v", len(h.e.pending[testRelay]), h.r.Status)
	}
}

// TestSinceSubscriptionFailed: a since subscription closed by the relay (or
// without EOSE) fails the catch-up batch: the relay is connected with
// historic sync failures, and the retry pages the failed filters.
func TestSinceSubscriptionFailed(t *testing.T) {
	h := newHistoricEnv(t)
	since := h.quickReconnect(t)
	id, cu := h.layer2Sub(t)
	for oid, o := range h.r.since {
		if oid != id {
			h.e.subs.onSinceEOSE(testRelay, h.r.gen, oid, o, nil)
		}
	}
	h.e.subs.onSinceFailed(testRelay, h.r.gen, id, cu, historic.ErrSubscriptionClosed)
	if h.r.Status != repoindex.ConnectedHistoricSyncFailures || len(h.r.failed) != 1 {
		t.Fatalf("after a CLOSED: %v with %d failed batches, want connected_historic_sync_failures", h.r.Status, len(h.r.failed))
	}
	before := h.hs.count()
	h.clk.Advance(time.Minute)
	h.e.onTick()
	h.drain(t)
	asked := h.callsSince(before)
	if !slices.ContainsFunc(asked, func(f nostr.Filter) bool { return len(f.Tags["a"]) > 0 }) {
		t.Fatalf("the retry paged %v, want the #a filter", asked)
	}
	for _, f := range asked {
		if f.Since == nil || *f.Since != since {
			t.Fatalf("the retry paged %v: since %v, want %d", f, f.Since, since)
		}
	}
	if h.r.Status != repoindex.Connected {
		t.Fatalf("after the retry: %v", h.r.Status)
	}
}

// TestIncompleteCatchUpKeepsItsSince: a connection lost, or a sidecar
// stopped, before a quick reconnect's catch-up completed catches up from
// the first disconnection again on the next reconnect (and in the state it
// persists), not from the later one, which would skip what the relay got
// in between; once the catch-up completed, the next disconnection counts.
func TestIncompleteCatchUpKeepsItsSince(t *testing.T) {
	h := newHistoricEnv(t)
	first := h.quickReconnect(t) // disconnected a minute; no EOSE yet
	firstAt := h.r.catchupFrom
	if p := h.e.snapshotRelays(); len(p) != 1 || !p[0].DisconnectedAt.Equal(firstAt) {
		t.Fatalf("persisted %+v while the catch-up is pending, want disconnected_at %v", p, firstAt)
	}
	reconnect := func() {
		h.e.onDisconnected(testRelay, h.r.gen, errors.New("connection reset"))
		h.clk.Advance(5 * time.Minute)
		h.r.gen++
		h.r.Status, h.r.live = repoindex.Connecting, map[string]int{} // as onDialed does
		h.e.connectOrReconnect(h.r)
	}
	reconnect()
	for _, f := range h.sinceFilters() {
		if *f.Since != first {
			t.Fatalf("after a second drop: since %d, want %d (the first disconnection)", *f.Since, first)
		}
	}
	h.eose(t)
	if p := h.e.snapshotRelays(); !p[0].DisconnectedAt.IsZero() || !p[0].SeenUp.Equal(h.clk.Now()) {
		t.Fatalf("persisted %+v after the catch-up, want up", p)
	}
	dropped := h.clk.Now()
	reconnect()
	want := nostr.Timestamp(dropped.Add(-h.e.cfg.SinceBuffer).Unix())
	for _, f := range h.sinceFilters() {
		if *f.Since != want {
			t.Fatalf("after a completed catch-up: since %d, want %d", *f.Since, want)
		}
	}
}
