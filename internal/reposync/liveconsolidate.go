package reposync

import (
	"fmt"
	"slices"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
)

// catchUpFrom is the earliest time a catch-up of r's confirmed items must
// reach back to (before the since buffer): a quick reconnect's catch-up or
// NIP-77 reconciliation that has not completed, or items confirmed without
// live filters (liveDeferredAt), whichever is earlier; at most now.
func catchUpFrom(r *remote, now time.Time) time.Time {
	for _, t := range []time.Time{r.catchupFrom, r.liveDeferredAt, r.windowFrom} {
		if !t.IsZero() && t.Before(now) {
			now = t
		}
	}
	return now
}

// consolidate closes every live subscription of the relay and re-opens
// Layer 1 and Layers 2/3 for everything confirmed or pending in as few
// filters as possible, with since now − consolidation_overlap (they were
// live until now; since_buffer re-read 15 minutes of every repository at
// each consolidation), or a catch-up batch since the first item whose live
// filters were deferred − since_buffer, when some were: events that came
// meanwhile arrive as stored ones.
func (ls liveSubs) consolidate(r *remote) {
	from, overlap := ls.e.clock.Now(), ls.e.cfg.ConsolidationOverlap
	deferredFrom := r.liveDeferredAt
	if !deferredFrom.IsZero() && deferredFrom.Before(from) {
		from, overlap = deferredFrom, ls.e.cfg.SinceBuffer
	}
	r.liveDeferredAt = time.Time{}
	since := nostr.Timestamp(from.Add(-overlap).Unix())
	ls.e.log.Info("consolidating subscriptions", zap.String("relay", r.URL), zap.Int("filters", ls.filtersOpen(r)), zap.Int("subscriptions", len(r.live)),
		zap.Time("since", since.Time()))
	for id := range r.live {
		if id != kindSub {
			ls.closeLive(r, id)
		}
	}
	r.consolidateBy = time.Time{}
	r.rebuildLive, r.replaces = false, nil // closed above: a queued EOSE must not close the new ones
	items := repoindex.NewItems()
	items.Repos.AddAll(r.Confirmed.Repos)
	items.Roots.AddAll(r.Confirmed.Roots)
	for _, b := range ls.e.pending[r.URL] {
		items.Repos.AddAll(b.Items.Repos)
		items.Roots.AddAll(b.Items.Roots)
	}
	ls.refsOf(r).Add(items)
	if deferredFrom.IsZero() {
		ls.subscribeCatchup(r, items, since)
	} else {
		// Live filters deferred (or closed by the relay) since
		// deferredFrom: what came since then arrives as stored events,
		// a catch-up batch like a quick reconnect's, so it is not lost
		// if a REQ is refused or the connection ends before its EOSE.
		b := ls.subscribeCatchupBatch(r, items, since)
		if r.catchupFrom.IsZero() || deferredFrom.Before(r.catchupFrom) {
			r.catchupFrom = deferredFrom
		}
		r.catchup = b
	}
	r.baseline = ls.filtersOpen(r)
}

// subscribeCatchup opens Layer 1 and Layers 2/3 for items as subscriptions
// with since: stored events since then, then live. Layer 3 is asked per
// root by `e` and `q` and by kind in the relay's kind subscription, opened
// with since unless it is open already (livekindsub.go).
func (ls liveSubs) subscribeCatchup(r *remote, items repoindex.Items, since nostr.Timestamp) {
	ls.openLive(r, "l1", []nostr.Filter{nip34.Layer1(&since)})
	if items.Roots.Len() > 0 {
		ls.openKindSub(r, since)
	}
	for _, c := range ls.catchupChunks(r, items.Repos.Sorted(), items.Roots.Sorted(), &since) {
		r.liveSeq++
		ls.openLiveMatch(r, fmt.Sprintf("l%d", r.liveSeq+1), c, nil, nil)
	}
}

// catchupChunks are the REQs of a consolidation's per-root Layers 2/3
// (nip34.Layers23ByRoot: the kind filters are a subscription of their own, kept
// open, since a kind filter with since brings every comment of the relay
// since then) of ValuesPerFilter values, widened (never past the relay's
// learned tag-value bound, which chunkLive applies) until they leave room
// in the relay's subscription budget for Layer 1, the kind subscription, a
// historic job, the growing subscription and its wider replacement (with
// one fewer, each new root consolidated everything, as subsFull found no
// room to replace the growing one). Over the budget the relay refuses
// some with CLOSED, which rebuilds the live subscriptions by consolidating
// again: a loop. What still does not fit is opened and logged.
func (ls liveSubs) catchupChunks(r *remote, repos, roots []string, since *nostr.Timestamp) [][]nostr.Filter {
	room := max(1, ls.e.d.Health.SubscriptionBudget(r.URL)-5)
	per := ls.e.cfg.ValuesPerFilter
	if per <= 0 {
		per = nip34.DefaultValuesPerFilter
	}
	chunks := ls.chunkLive(r, nip34.Layers23ByRoot(repos, roots, per, since))
	limits := ls.e.d.Health.Limits(r.URL)
	bound, maxBytes := limits.MaxTagValues, historic.ReqBytesLimit(limits)
	for len(chunks) > room && per < len(repos)+len(roots) && (bound <= 0 || per < bound) {
		per *= 2
		fs := historic.FitTagValues(nip34.Layers23ByRoot(repos, roots, per, since), bound)
		if slices.ContainsFunc(fs, func(f nostr.Filter) bool { return historic.FilterBytes(f) > maxBytes }) {
			break // one filter alone would be over the relay's message size
		}
		wider := ls.chunkFilters(r, fs)
		if len(wider) >= len(chunks) {
			break
		}
		chunks = wider
	}
	if len(chunks) > room {
		ls.e.log.Warn("live subscriptions exceed the relay's subscription budget",
			zap.String("relay", r.URL), zap.Int("subscriptions", 1+len(chunks)), zap.Int("budget", ls.e.d.Health.SubscriptionBudget(r.URL)))
	}
	return chunks
}
