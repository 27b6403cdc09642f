package reposync

import (
	"fmt"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// sinceSub is one live subscription opened with since on a quick
// reconnect: the stored events it receives before its EOSE are one part of
// a catch-up batch, so each filter goes to the relay once for the catch-up
// and the live tail alike.
type sinceSub struct {
	batch   *repoindex.PendingBatch
	run     *batchRun
	filters []nostr.Filter // as sent: since, and limit the pager's page size
}

// subscribeSince opens Layer 1 and Layers 2/3 of items as live
// subscriptions with since, Layer 3 by kind where it can
// (nip34.Layer3Live: the kind filters' events are handed on only when they
// refer to one of items). Together they are one pending catch-up batch:
// each subscription's EOSE completes its part, a filter whose answer
// reached the relay's cap (Pager.ReachedCap) is paged on below what came
// with the REQ pager, and a CLOSED or no EOSE within the EOSE timeout
// fails the batch, retried with the REQ pager (Config.historicRetry).
func (ls liveSubs) subscribeSince(r *remote, items repoindex.Items, since nostr.Timestamp) *repoindex.PendingBatch {
	limit := ls.e.pager.PageSizeFor(r.URL)
	parts := []sincePart{{id: "l1", filters: withLimit([]nostr.Filter{nip34.Layer1(&since)}, limit)}}
	if fs := nip34.Layers23Live(items.Repos.Sorted(), items.Roots.Sorted(), ls.e.cfg.ValuesPerFilter, &since); len(fs) > 0 {
		refers := repoindex.ReferTo(items)
		for _, c := range ls.chunkLive(r, withLimit(fs, limit)) {
			parts = append(parts, sincePart{filters: c, refers: refers})
		}
	}
	return ls.openSinceBatch(r, items, parts)
}

// subscribeCatchupBatch is subscribeCatchup as one pending catch-up batch
// (subscribeSince's handling: each subscription's EOSE completes its part,
// a filter whose answer reached the relay's cap is paged on, a CLOSED or
// no EOSE fails the batch, retried with the REQ pager): for a
// consolidation that opens live filters deferred, or closed by the relay,
// since a time before now − since_buffer. The kind subscription is a part
// when this opens it; kept open, it has been live all along.
func (ls liveSubs) subscribeCatchupBatch(r *remote, items repoindex.Items, since nostr.Timestamp) *repoindex.PendingBatch {
	limit := ls.e.pager.PageSizeFor(r.URL)
	parts := []sincePart{{id: "l1", filters: withLimit([]nostr.Filter{nip34.Layer1(&since)}, limit)}}
	if _, kindOpen := r.live[kindSub]; items.Roots.Len() > 0 && !kindOpen {
		parts = append(parts, sincePart{id: kindSub, filters: withLimit(ls.kindFilters(r, &since), limit), refers: ls.refsOf(r).Refers})
	}
	for _, c := range ls.catchupChunks(r, items.Repos.Sorted(), items.Roots.Sorted(), &since) {
		parts = append(parts, sincePart{filters: withLimit(c, limit)})
	}
	return ls.openSinceBatch(r, items, parts)
}

// sincePart is one live subscription with since of a catch-up batch: its
// id (empty: the relay's next chunk id), its filters as sent (since, and
// limit the pager's page size) and filtermatch.Checked's refers (nil: none).
type sincePart struct {
	id      string
	filters []nostr.Filter
	refers  func(*nostr.Event) bool
}

// openSinceBatch opens parts as one pending catch-up batch of items, one
// sinceSub each: each part's EOSE completes it.
func (ls liveSubs) openSinceBatch(r *remote, items repoindex.Items, parts []sincePart) *repoindex.PendingBatch {
	b := &repoindex.PendingBatch{Items: items, Catchup: true}
	ls.e.sched.addPending(r, b)
	run := &batchRun{left: len(parts), pager: true}
	for _, p := range parts {
		id := p.id
		if id == "" {
			r.liveSeq++
			id = fmt.Sprintf("l%d", r.liveSeq+1)
		}
		ls.openLiveMatch(r, id, p.filters, p.refers, &sinceSub{batch: b, run: run, filters: p.filters})
	}
	return b
}

// withLimit returns copies of fs asking at most limit stored events.
func withLimit(fs []nostr.Filter, limit int) []nostr.Filter {
	out := make([]nostr.Filter, len(fs))
	for i, f := range fs {
		f.Until, f.Limit, f.LimitZero = nil, limit, false
		out[i] = f
	}
	return out
}

// sinceOf returns the relay whose since subscription id is still cu, and
// unregisters it: its EOSE, CLOSED or timeout is handled once.
func (ls liveSubs) sinceOf(url string, gen uint64, id string, cu *sinceSub) *remote {
	r := ls.e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() || cu == nil || r.since[id] != cu {
		return nil
	}
	delete(r.since, id)
	return r
}

// onSinceEOSE: a since subscription's stored events are in. The filters
// whose answer reached the relay's cap (rest, bounded by until) are paged
// on as jobs of the same batch.
func (ls liveSubs) onSinceEOSE(url string, gen uint64, id string, cu *sinceSub, rest []nostr.Filter) {
	r := ls.sinceOf(url, gen, id, cu)
	if r == nil {
		return
	}
	if len(rest) > 0 {
		ls.e.log.Info("catch-up subscription reached the relay's cap; paging the rest",
			zap.String("relay", url), zap.String("subscription", id), zap.Int("filters", len(rest)))
		ls.pageRest(r, cu, rest)
	}
	ls.e.sched.runDone(r, cu.batch, cu.run, nil, nil)
}

// onSinceFailed: a since subscription was closed by the relay or got no
// EOSE in time; its filters fail the batch (retried with the REQ pager).
func (ls liveSubs) onSinceFailed(url string, gen uint64, id string, cu *sinceSub, err error) {
	r := ls.sinceOf(url, gen, id, cu)
	if r == nil {
		return
	}
	ls.e.sched.runDone(r, cu.batch, cu.run, cu.filters, fmt.Errorf("catch-up subscription: %w", err))
}

// sinceClosed: we close a since subscription before its EOSE (a
// consolidation, a full resync): its filters are paged with the REQ pager
// as jobs of the same batch instead.
func (ls liveSubs) sinceClosed(r *remote, id string) {
	cu := r.since[id]
	if cu == nil {
		return
	}
	delete(r.since, id)
	ls.pageRest(r, cu, cu.filters)
	cu.run.left-- // the subscription's part is replaced by its jobs
}

// pageRest queues fs as REQ-pager jobs of cu's batch (started by startJobs).
func (ls liveSubs) pageRest(r *remote, cu *sinceSub, fs []nostr.Filter) {
	cu.run.left += len(fs)
	ls.e.sched.queueFilters(r, cu.batch, cu.run, fs)
}

// newSinceCount counts cu's stored events until its EOSE (nil without
// cu): which filters reached the relay's cap, where to page on.
func (ls liveSubs) newSinceCount(cu *sinceSub, c *relay.Conn) *truncation.CapCount {
	if cu == nil {
		return nil
	}
	return truncation.NewCapCount(cu.filters, c.Stalled, ls.e.clock, ls.e.cfg.EOSETimeout)
}
