package reposync

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// rootsItems are n root ids starting at from, as items.
func rootsItems(from, n int) repoindex.Items {
	items := repoindex.NewItems()
	for i := range n {
		items.Roots.Add(fmt.Sprintf("%064x", from+i))
	}
	return items
}

// liveFor tells whether root is in r's open growing subscription.
func liveFor(r *remote, root string) bool {
	if r.growing == nil {
		return false
	}
	_, open := r.live[r.growing.id]
	return open && r.growing.items.Roots.Has(root)
}

// TestNewRootsGrowOneSubscription: roots found after the first sync, one
// at a time, join one live subscription (its REQ sent again) instead of
// opening one each, which filled the relay's budget every few roots and
// consolidated (reading every filter's last seconds again); one holding
// values_per_filter roots is left as it is and the next one starts.
func TestNewRootsGrowOneSubscription(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	per := h.e.cfg.ValuesPerFilter
	before, consolidations := perRootLive(h.r), len(h.consolidationsSince())
	for i := range per + 1 {
		h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(i, 1)})
		h.drain(t)
		h.e.subs.onLiveEOSE(testRelay, h.r.gen, h.r.growing.id, nil, nil) // the relay took it: the one it replaces is closed
		if !liveFor(h.r, fmt.Sprintf("%064x", i)) {
			t.Fatalf("root %d is not in the open growing subscription", i)
		}
	}
	// The kind subscription, the full growing one and the next.
	if n := perRootLive(h.r) - before; n > 3 || len(h.consolidationsSince()) != consolidations {
		t.Fatalf("%d roots opened %d live subscriptions and %d consolidations, want at most 3 and none",
			per+1, n, len(h.consolidationsSince())-consolidations)
	}
	if h.r.growing.items.Roots.Len() != 1 {
		t.Fatalf("the growing subscription holds %d roots after %d, want a new one of 1", h.r.growing.items.Roots.Len(), per+1)
	}
}

// perRootLive counts r's live subscriptions other than Layer 1.
func perRootLive(r *remote) int {
	n := 0
	for id := range r.live {
		if id != "l1" {
			n++
		}
	}
	return n
}

// eoses answers every open since subscription (a catch-up batch's part)
// with its EOSE, as the relay would, and drains the jobs that follow.
func (h *historicEnv) eoses(t *testing.T) {
	t.Helper()
	for len(h.r.since) > 0 {
		for id, cu := range h.r.since {
			h.e.subs.onSinceEOSE(testRelay, h.r.gen, id, cu, nil)
		}
		h.drain(t)
	}
}

// consolidationsSince returns the since of each "consolidating
// subscriptions" logged.
func (h *historicEnv) consolidationsSince() []time.Time {
	var out []time.Time
	for _, l := range h.logs.FilterMessage("consolidating subscriptions").All() {
		if v, ok := l.ContextMap()["since"].(time.Time); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestLiveFiltersDeferredWhileBatchesPending: during a first sync (the
// Layer 1 batch pending) new roots arriving in six self batches run their
// history at once, many jobs at a time, while no live per-root
// subscription is opened (on a relay taking one filter per REQ their 18
// REQs would leave the jobs 1 of its 20 subscriptions); Layer 1 stays live.
// When the last batch is done one consolidation opens them all, with since
// reaching back to the first deferred item minus since_buffer, and the
// relay's historic sync is complete then, not before.
func TestLiveFiltersDeferredWhileBatchesPending(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.d.Health.SetLimits(testRelay, relay.Limits{MaxFilters: 1})
	h.e.subs.subscribeLayer1(h.r) // as a fresh sync does
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)

	first := h.clk.Now()
	peak := 0
	for i := range 6 {
		h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(i*100, 100)})
		peak = max(peak, h.r.running)
		if n := perRootLive(h.r); n != 0 {
			t.Fatalf("batch %d: %d live per-root subscriptions opened while batches are pending, want none", i, n)
		}
		if _, ok := h.r.live["l1"]; !ok {
			t.Fatal("Layer 1 is not live")
		}
		if h.r.HistoricDone || h.r.Status != repoindex.Syncing {
			t.Fatalf("batch %d: %v (historic done %v) while batches are pending", i, h.r.Status, h.r.HistoricDone)
		}
		h.clk.Advance(time.Second)
	}
	// 1 + 6×3 filters of one job each; HistoricMaxJobs (16) bounds them.
	if want := h.e.cfg.HistoricMaxJobs; peak < want {
		t.Fatalf("at most %d historic jobs ran at once, want %d (HistoricMaxJobs): live subscriptions took the slots", peak, want)
	}
	if h.r.Confirmed.Roots.Len() != 0 || len(h.consolidationsSince()) != 0 {
		t.Fatal("roots confirmed, or subscriptions consolidated, before any job reported")
	}

	h.drain(t)
	// The consolidation's subscriptions are one catch-up batch: the relay
	// is synced once their stored events (since the first deferred item)
	// are in, not when the REQs go out.
	if h.r.HistoricDone || h.r.Status != repoindex.Syncing || len(h.r.since) == 0 {
		t.Fatalf("before the catch-up's EOSEs: %v, historic done %v, %d since subscriptions", h.r.Status, h.r.HistoricDone, len(h.r.since))
	}
	h.eoses(t)
	if got := h.hs.count(); got != 1+6*3 {
		t.Fatalf("%d historic jobs, want %d", got, 1+6*3)
	}
	if n := perRootLive(h.r); n == 0 || n > h.e.d.Health.SubscriptionBudget(testRelay)-3 {
		t.Fatalf("%d live per-root subscriptions after the batches, want some, within the budget less 3 (catchupChunks)", n)
	}
	since := h.consolidationsSince()
	if want := first.Add(-h.e.cfg.SinceBuffer); len(since) != 1 || !since[0].Equal(want) {
		t.Fatalf("consolidations since %v, want one since %v (the first deferred item − since_buffer)", since, want)
	}
	if !h.r.liveDeferredAt.IsZero() || h.r.Status != repoindex.Connected || !h.r.HistoricDone || h.r.Confirmed.Roots.Len() != 600 {
		t.Fatalf("after the batches: deferred since %v, %v, historic done %v, %d roots confirmed",
			h.r.liveDeferredAt, h.r.Status, h.r.HistoricDone, h.r.Confirmed.Roots.Len())
	}

	// Steady state: a new root with no batch pending is live at once.
	before := perRootLive(h.r)
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(1000, 1)})
	if perRootLive(h.r) <= before || !h.r.liveDeferredAt.IsZero() {
		t.Fatalf("a root added with nothing pending: %d live per-root subscriptions (had %d), deferred since %v",
			perRootLive(h.r), before, h.r.liveDeferredAt)
	}
	h.drain(t)
	if len(h.consolidationsSince()) != 1 {
		t.Fatal("a root added with nothing pending consolidated")
	}
}

// TestLiveDeferralBounded: deferred live filters wait at most
// Config.LiveDeferMax; then they are opened by a consolidation though
// batches are still pending, since the first deferred item minus
// since_buffer. With LiveDeferMax 0 they are opened at once.
func TestLiveDeferralBounded(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.subs.subscribeLayer1(h.r)
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	first := h.clk.Now()
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 10)})
	h.clk.Advance(h.e.cfg.LiveDeferMax - time.Second)
	h.e.onTick()
	if perRootLive(h.r) != 0 {
		t.Fatal("deferred live filters opened before LiveDeferMax")
	}
	h.clk.Advance(time.Second)
	h.e.onTick()
	if perRootLive(h.r) == 0 || len(h.e.pending[testRelay]) == 0 {
		t.Fatalf("after LiveDeferMax: %d live per-root subscriptions, %d batches pending; want them open while pending",
			perRootLive(h.r), len(h.e.pending[testRelay]))
	}
	if since := h.consolidationsSince(); len(since) != 1 || !since[0].Equal(first.Add(-h.e.cfg.SinceBuffer)) {
		t.Fatalf("consolidations since %v, want one since %v", since, first.Add(-h.e.cfg.SinceBuffer))
	}
	h.drain(t)
	h.eoses(t)
	if len(h.consolidationsSince()) != 1 || h.r.Status != repoindex.Connected {
		t.Fatalf("%d consolidations, %v: the batches' end had nothing left to open", len(h.consolidationsSince()), h.r.Status)
	}

	h = newHistoricEnv(t)
	h.e.cfg.LiveDeferMax = 0
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 10)})
	if perRootLive(h.r) == 0 {
		t.Fatal("LiveDeferMax 0: live filters not opened at once")
	}
	h.drain(t)
}

// TestDisconnectCatchesUpFromDeferral: a relay that drops while items are
// confirmed without their live filters catches up from the first deferred
// item, not from the disconnection, and so does a stopped sidecar's saved
// relay state.
func TestDisconnectCatchesUpFromDeferral(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)               // the repository is confirmed: a quick reconnect is possible
	h.r.HistoricDone = false // its first sync goes on: new items are deferred
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	first := h.clk.Now()
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 10)})
	h.clk.Advance(2 * time.Minute)
	if ps := h.e.snapshotRelays(); len(ps) != 1 || !ps[0].DisconnectedAt.Equal(first) {
		t.Fatalf("saved state %+v, want disconnected_at %v", ps, first)
	}
	h.e.onDisconnected(testRelay, h.r.gen, fmt.Errorf("connection reset"))
	if !h.r.DisconnectedAt.Equal(first) || !h.r.liveDeferredAt.IsZero() {
		t.Fatalf("disconnected at %v (deferred since %v), want %v", h.r.DisconnectedAt, h.r.liveDeferredAt, first)
	}
}

// TestSlotsLentWhileJobsWaitForTheSharedBound: jobs queued only for a place
// under HistoricMaxJobs leave the relay's free slots to the running jobs'
// reconciliations (one kept back for the next job), not to their fetches;
// jobs waiting for a subscription slot stop the lending.
func TestSlotsLentWhileJobsWaitForTheSharedBound(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.cfg.HistoricMaxJobs = 2
	var fs []nostr.Filter
	for i := range 10 {
		fs = append(fs, nostr.Filter{Tags: nostr.TagMap{"a": {fmt.Sprintf("30617:%064x:r", i)}}})
	}
	h.e.sched.startBatch(h.r, repoindex.NewItems(), fs, false)
	l := h.e.sched.lender(h.r)
	budget := h.e.d.Health.SubscriptionBudget(testRelay)
	if h.r.running != 2 || l.Waiting() || l.Spare() != budget-2-1 {
		t.Fatalf("%d running, lender waiting %v spare %d; want 2 running and %d slots lent out", h.r.running, l.Waiting(), l.Spare(), budget-3)
	}
	b := historic.NewJobSlotsBorrower(l, 3)
	if b.Borrow() || !b.BorrowReconcile() {
		t.Fatal("jobs queued for the shared bound: want a slot for a reconciliation and none for a fetch")
	}
	b.GiveBack()
	for i := range budget - 3 {
		h.r.live[fmt.Sprintf("l%d", i+2)] = 1
	}
	h.e.sched.startJobs(h.r)
	if !l.Waiting() || l.Spare() != 0 {
		t.Fatalf("jobs wait for a slot: lender waiting %v spare %d, want nothing lent", l.Waiting(), l.Spare())
	}
	h.r.live = map[string]int{}
	h.drain(t)
}

// TestClosedLiveFilterCatchesUpFromTheClose: a live per-root subscription
// the relay closes is rebuilt only once the relay's pending batches are
// done, which can be long after the close: the rebuild's consolidation asks
// since the close − since_buffer (not now − since_buffer) as a catch-up
// batch, and a catch-up REQ the relay refuses fails that batch, kept for
// the REQ pager with its since, instead of leaving the window to the daily
// full resync.
func TestClosedLiveFilterCatchesUpFromTheClose(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.subs.subscribeLayer1(h.r)
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 10)})
	h.drain(t)
	h.eoses(t)
	if h.r.Status != repoindex.Connected || perRootLive(h.r) == 0 {
		t.Fatalf("after the first sync: %v, %d live per-root subscriptions", h.r.Status, perRootLive(h.r))
	}
	var perRoot string
	for id := range h.r.live {
		if id != "l1" && id != kindSub {
			perRoot = id
		}
	}

	// The relay closes it; a long batch keeps the rebuild waiting.
	closedAt := h.clk.Now()
	h.e.subs.onLiveClosed(testRelay, h.r.gen, perRoot, "error: shutting down idle subscription")
	h.e.sched.startBatch(h.r, rootsItems(100, 1), nip34.Layer3([]string{fmt.Sprintf("%064x", 100)}, 100, nil), false)
	h.clk.Advance(2 * h.e.cfg.SinceBuffer)
	h.e.onTick()
	h.drain(t)
	h.clk.Advance(time.Second)
	h.e.onTick()

	since := h.consolidationsSince()
	want := closedAt.Add(-h.e.cfg.SinceBuffer)
	if len(since) < 2 || !since[len(since)-1].Equal(want) {
		t.Fatalf("consolidations since %v, want the rebuild's since %v (the close − since_buffer)", since, want)
	}
	if len(h.e.pending[testRelay]) == 0 || len(h.r.since) == 0 {
		t.Fatalf("the rebuild is no catch-up batch: %d batches pending, %d since subscriptions", len(h.e.pending[testRelay]), len(h.r.since))
	}
	// The relay refuses one of the catch-up's REQs: the batch fails and
	// keeps its filters, since included, for the REQ pager.
	for id, cu := range h.r.since {
		if id != "l1" {
			h.e.subs.onSinceFailed(testRelay, h.r.gen, id, cu, historic.ErrSubscriptionClosed)
			break
		}
	}
	h.eoses(t)
	if len(h.r.failed) == 0 {
		t.Fatal("a refused catch-up REQ left no failed batch")
	}
	for _, rj := range h.r.failed {
		for _, f := range rj.Filters {
			if f.Since == nil || f.Since.Time().After(want) {
				t.Fatalf("the failed catch-up keeps %v, want since %v", f, want)
			}
		}
	}
}

// TestAuthRequiredCloseWithoutKeyIsNotRetried: a live subscription the
// relay closes "auth-required:" on a connection that cannot authenticate
// (no key) is not opened again on that connection: its filters are not
// deferred, so the end of the next batch consolidates nothing. Deferred,
// they were opened again as a catch-up batch whose REQs the relay closed
// "auth-required:" again, deferring them for the next consolidation, round
// after round (integration TestWildAuthReadsWithoutKey: the relay asked
// again and again).
func TestAuthRequiredCloseWithoutKeyIsNotRetried(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.pager.Auth = nil // no authenticator: Ensure fails as it does without a key
	h.e.subs.subscribeLayer1(h.r)
	h.e.sched.startBatch(h.r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 10)})
	h.drain(t)
	h.eoses(t)
	if h.r.Status != repoindex.Connected || perRootLive(h.r) == 0 {
		t.Fatalf("after the first sync: %v, %d live per-root subscriptions", h.r.Status, perRootLive(h.r))
	}
	var perRoot string
	for id := range h.r.live {
		if id != "l1" && id != kindSub {
			perRoot = id
		}
	}
	consolidations := len(h.consolidationsSince())

	h.e.subs.onLiveClosed(testRelay, h.r.gen, perRoot, "auth-required: authenticate with NIP-42 first")
	h.e.wg.Wait() // the authentication attempt, failed
	h.e.sched.startBatch(h.r, rootsItems(100, 1), nip34.Layer3([]string{fmt.Sprintf("%064x", 100)}, 100, nil), false)
	h.drain(t)
	h.clk.Advance(time.Second)
	h.e.onTick()

	if n := len(h.consolidationsSince()); n != consolidations || !h.r.liveDeferredAt.IsZero() || len(h.r.since) != 0 {
		t.Fatalf("%d consolidations after the close (deferred since %v, %d since subscriptions), want none: a relay that needs a key is not asked again",
			n-consolidations, h.r.liveDeferredAt, len(h.r.since))
	}
	if _, open := h.r.live[perRoot]; open {
		t.Fatal("the closed subscription is open again")
	}
}

// TestSteadyStateRootsLiveAtOnce: after the first sync, a root added while
// another root's small batch is pending opens its live filters at once
// (roots arriving steadily deferred one another, each batch's end
// consolidated every live subscription: one a second under steady
// traffic); a consolidation of filters that were live until then reaches
// back consolidation_overlap, not since_buffer (15 minutes of every
// repository read again each time).
func TestSteadyStateRootsLiveAtOnce(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	if !h.r.HistoricDone {
		t.Fatal("the first sync is not done")
	}
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(0, 1)})
	if len(h.e.pending[testRelay]) == 0 {
		t.Fatal("the first root's batch is not pending")
	}
	h.e.subs.addFilters(repoindex.AddFilters{Relay: testRelay, Items: rootsItems(1, 1)})
	if !liveFor(h.r, fmt.Sprintf("%064x", 1)) || !h.r.liveDeferredAt.IsZero() {
		t.Fatalf("a root added while a batch is pending: live %v, deferred since %v", liveFor(h.r, fmt.Sprintf("%064x", 1)), h.r.liveDeferredAt)
	}
	h.drain(t)
	now := h.clk.Now()
	h.e.subs.consolidate(h.r)
	want := time.Unix(now.Add(-h.e.cfg.ConsolidationOverlap).Unix(), 0)
	if since := h.consolidationsSince(); len(since) != 1 || !since[0].Equal(want) {
		t.Fatalf("consolidations since %v, want one since %v (now − consolidation_overlap)", since, want)
	}

	// Filters a NOTICE refused were not live: their rebuild catches up
	// from the NOTICE.
	noticeAt := h.clk.Now()
	h.e.subs.onNotice(testRelay, "ERROR: too many concurrent REQs")
	select {
	case fn := <-h.e.inbox:
		fn()
	case <-time.After(10 * time.Second):
		t.Fatal("the NOTICE posted nothing")
	}
	if !h.r.liveDeferredAt.Equal(noticeAt) {
		t.Fatalf("after a NOTICE refusing a REQ: deferred since %v, want %v", h.r.liveDeferredAt, noticeAt)
	}
}
