package reposync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/filtermatch"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// exec queues a command for the relay's writer goroutine. A relay whose
// command queue is full is not reading: it is disconnected.
func (ls liveSubs) exec(r *remote, fn func(*relay.Conn)) {
	if r.cmds == nil {
		return
	}
	select {
	case r.cmds <- fn:
	default:
		ls.e.log.Warn("relay command queue full; disconnecting", zap.String("relay", r.URL))
		ls.e.onDisconnected(r.URL, r.gen, errors.New("command queue full"))
	}
}

func (ls liveSubs) subscribeLayer1(r *remote) {
	ls.openLive(r, "l1", nip34.Live([]nostr.Filter{nip34.Layer1(nil)}))
}

// subscribeLive opens live subscriptions (limit 0) for fs, split into REQs
// of at most the relay's max_filters.
func (ls liveSubs) subscribeLive(r *remote, fs []nostr.Filter) {
	if len(fs) == 0 {
		return
	}
	ls.openChunked(r, nip34.Live(fs), nil)
}

// jobMatch is a historic job's check of what arrives: its filters, and for
// a kind filter of Layer 3 (a catch-up batch's) a reference to one of its
// batch's items. Called on the loop goroutine (the items are copied).
func jobMatch(j *job) func(*nostr.Event) bool {
	var refers func(*nostr.Event) bool
	if slices.ContainsFunc(j.filters, nip34.ByKind) {
		refers = repoindex.ReferTo(j.batch.Items)
	}
	return filtermatch.Checked(j.filters, nip34.ByKind, refers)
}

// openChunked opens fs as subscriptions of at most the relay's max_filters
// filters and maxReqBytes of filter JSON each (less when the relay
// announces a smaller max_message_length). refers, when set, is the
// arrival check of the kind filters among fs (filtermatch.Checked).
func (ls liveSubs) openChunked(r *remote, fs []nostr.Filter, refers func(*nostr.Event) bool) {
	for _, c := range ls.chunkLive(r, fs) {
		r.liveSeq++
		ls.openLiveMatch(r, fmt.Sprintf("l%d", r.liveSeq+1), c, refers, nil)
	}
}

// chunkLive splits fs into the filters of REQs of at most the relay's
// max_filters filters and maxReqBytes of filter JSON each.
func (ls liveSubs) chunkLive(r *remote, fs []nostr.Filter) [][]nostr.Filter {
	return ls.chunkFilters(r, historic.FitTagValues(fs, ls.e.lim.ValuesPerFilter(r.URL)))
}

// chunkFilters is chunkLive without fitting the filters' tag values.
func (ls liveSubs) chunkFilters(r *remote, fs []nostr.Filter) [][]nostr.Filter {
	var out [][]nostr.Filter
	limits := ls.e.d.Health.Limits(r.URL)
	per := limits.MaxFilters
	if per <= 0 || per > 100 {
		per = 100
	}
	maxBytes := historic.ReqBytesLimit(limits)
	for start := 0; start < len(fs); {
		end, size := start, 0
		for end < len(fs) && end-start < per {
			n := historic.FilterBytes(fs[end])
			if end > start && size+n > maxBytes {
				break
			}
			size += n
			end++
		}
		out = append(out, fs[start:end])
		start = end
	}
	return out
}

func (ls liveSubs) openLive(r *remote, id string, fs []nostr.Filter) {
	ls.openLiveMatch(r, id, fs, nil, nil)
}

// liveBuffer is the queue of a live subscription: most are idle, and a
// large relay has thousands open, so a deep queue each is heap that does
// nothing.
const liveBuffer = 32

// openLiveMatch opens a live subscription whose events are checked with
// filtermatch.Checked(fs, nip34.ByKind, refers). With cu, fs carry since and the stored events
// before EOSE are cu's catch-up (sinceSub).
func (ls liveSubs) openLiveMatch(r *remote, id string, fs []nostr.Filter, refers func(*nostr.Event) bool, cu *sinceSub) {
	if _, open := r.live[id]; open {
		ls.closeLive(r, id)
	}
	r.live[id] = len(fs)
	if cu != nil {
		if r.since == nil {
			r.since = map[string]*sinceSub{}
		}
		r.since[id] = cu
	}
	ls.e.m.FiltersOpen.WithLabelValues(r.URL).Set(float64(ls.filtersOpen(r)))
	url, gen, ctx, count := r.URL, r.gen, ls.e.ctx, &r.received
	match := filtermatch.Checked(fs, nip34.ByKind, refers)
	atEOSE := func() { ls.e.post(func() { ls.onLiveEOSE(url, gen, id, fs, refers) }) }
	ls.exec(r, func(c *relay.Conn) {
		sub, err := c.SubscribeBuffered(ctx, id, nostr.Filters(fs), liveBuffer)
		if err != nil {
			if errors.Is(err, health.ErrRefused) { // never sent: rebuilt after the wait
				ls.e.post(func() { ls.onLiveClosed(url, gen, id, "") })
			}
			if cu != nil && !connEnded(c) { // a catch-up part never asked (an ended connection drops it)
				ls.e.post(func() { ls.onSinceFailed(url, gen, id, cu, err) })
			}
			return // the watcher reports the broken connection
		}
		ls.e.wg.Add(1)
		go func() {
			defer ls.e.wg.Done()
			ls.readLive(ctx, url, gen, sub, match, count, cu, ls.newSinceCount(cu, c), atEOSE)
		}()
	})
}

func (ls liveSubs) closeLive(r *remote, id string) {
	ls.sinceClosed(r, id)
	delete(r.live, id)
	ls.e.m.FiltersOpen.WithLabelValues(r.URL).Set(float64(ls.filtersOpen(r)))
	ls.exec(r, func(c *relay.Conn) { c.Unsubscribe(id) })
}

// readLive forwards a live subscription's events to the handler. cnt,
// when set, counts the stored events of cu, a since subscription, until
// its EOSE (newSinceCount); atEOSE, when set, runs at its EOSE.
func (ls liveSubs) readLive(ctx context.Context, url string, gen uint64, sub *relay.Subscription, match func(*nostr.Event) bool, count *atomic.Uint64, cu *sinceSub, cnt *truncation.CapCount, atEOSE func()) {
	recv := ls.e.m.EventsReceived.WithLabelValues(url)
	closed := func(reason string) {
		if cnt != nil {
			ls.e.post(func() {
				ls.onSinceFailed(url, gen, sub.ID, cu, fmt.Errorf("%w: %s", historic.ErrSubscriptionClosed, reason))
			})
		}
		ls.e.post(func() { ls.onLiveClosed(url, gen, sub.ID, reason) })
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-cnt.Timeout():
			if !cnt.Silent() {
				continue
			}
			ls.e.post(func() {
				ls.onSinceFailed(url, gen, sub.ID, cu, fmt.Errorf("%w (%s)", historic.ErrEOSETimeout, ls.e.cfg.EOSETimeout))
			})
			cnt = nil // live from here on
		case <-sub.Done():
			// Closed by us, or the connection ended: the events already
			// queued are handed on (a subscription replaced by a wider
			// one, the growing one's, would lose them), and a CLOSED
			// reported.
			for {
				select {
				case m, ok := <-sub.Messages():
					if !ok {
						return
					}
					switch {
					case m.Type == relay.MsgClosed:
						closed(m.Reason)
					case m.Type == relay.MsgEvent && match(m.Event):
						recv.Inc()
						count.Add(1)
						if ls.e.h.Handle(ctx, sub.Incoming(m)) != nil {
							return
						}
					}
				default:
					return
				}
			}
		case m, ok := <-sub.Messages():
			if !ok {
				return
			}
			switch m.Type {
			case relay.MsgEOSE:
				if cnt != nil {
					rest := cnt.Rest(func(n, limit int) bool { return ls.e.pager.ReachedCap(url, n, limit) })
					ls.e.post(func() { ls.onSinceEOSE(url, gen, sub.ID, cu, rest) })
					cnt = nil
				}
				if atEOSE != nil { // after onSinceEOSE: the part is complete when it is replaced
					atEOSE()
					atEOSE = nil
				}
			case relay.MsgEvent:
				recv.Inc()
				count.Add(1)
				cnt.Add(m.Event)
				if !match(m.Event) {
					// Answers we did not ask for, and kind filters' events
					// about foreign roots, are dropped before they cost a
					// queue slot or a signature check.
					ls.e.h.Invalid("no_match")
					continue
				}
				if err := ls.e.h.Handle(ctx, sub.Incoming(m)); err != nil {
					return
				}
			case relay.MsgClosed:
				closed(m.Reason)
				return
			}
		}
	}
}

// onLiveClosed: the relay closed a live subscription. It is rebuilt once
// the relay allows new REQs.
func (ls liveSubs) onLiveClosed(url string, gen uint64, id, reason string) {
	r := ls.e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	if _, ok := r.live[id]; !ok {
		return
	}
	filters := r.live[id]
	delete(r.live, id) // the health tracker heard the reason in onReason
	if reason != "" {  // "": not sent (health.ErrRefused)
		r.lastError = "CLOSED: " + reason
	}
	closedAt := ls.e.clock.Now()
	if health.ClassifyMessage(reason) == health.SignalTooManyFilters {
		ls.e.lim.LearnFilters(url, filters, "CLOSED: "+reason)
	}
	if relay.ReasonPrefix(reason) == relay.ReasonAuthRequired {
		// NIP-42: rebuild once the connection authenticated, catching up
		// from the close; without a key (or refused) the relay is reported
		// as needing one, not retried. The deferral is armed only then: a
		// deferral is itself a retry (the consolidation that ends the
		// pending batches opens the filters again, with since), and on a
		// connection that cannot authenticate each of its REQs was closed
		// "auth-required:" again, deferring the filters again for the next
		// consolidation, round after round.
		conn := r.conn
		ls.e.wg.Add(1)
		go func() {
			defer ls.e.wg.Done()
			if err := ls.e.pager.Auth.Ensure(ls.e.ctx, conn); err == nil {
				ls.e.post(func() {
					if r := ls.e.relays[url]; r != nil && r.gen == gen && r.Status.IsUp() {
						ls.deferLiveFrom(r, closedAt)
						r.rebuildLive = true
					}
				})
			}
		}()
		return
	}
	// Its filters are not live from now until the rebuild, which may wait
	// for the relay's pending batches: the rebuild catches up from here.
	ls.deferLiveFrom(r, closedAt)
	r.rebuildLive = true
	if health.ClassifyMessage(reason) == health.SignalNone { // the next tick's rebuild would be refused again
		r.rebuild.Fail(ls.e.cfg.historicRetry(), ls.e.clock.Now(), backoff.Rand())
	}
	// Once: not during a refusal wait (logged by health) nor per refusal in a row.
	if ls.e.d.Health.RefusalRemaining(url) <= 0 && ls.e.d.Pacer.Backoff(url) == "" && r.rebuild.Failures() <= 1 {
		ls.e.log.Info("relay closed a live subscription", zap.String("relay", url), zap.String("reason", reason),
			zap.Time("rebuild_after", r.rebuild.Until()))
	}
}

// deferLiveFrom records that live filters of r have not been live since
// at (liveDeferredAt keeps the earliest such time): the consolidation
// that opens them again catches up from there.
func (ls liveSubs) deferLiveFrom(r *remote, at time.Time) {
	if r.liveDeferredAt.IsZero() || at.Before(r.liveDeferredAt) {
		r.liveDeferredAt = at
	}
}

// onChallenge: the relay sent a NIP-42 AUTH challenge. With a key the
// connection authenticates before the relay has to refuse a read (the
// reference implementation answers with the relay owner's key); without
// one nothing happens until a read is refused.
func (ls liveSubs) onChallenge(url string) {
	r := ls.e.relays[url]
	if r == nil || r.conn == nil || ls.e.d.Sign == nil {
		return
	}
	conn := r.conn
	ls.e.wg.Add(1)
	go func() {
		defer ls.e.wg.Done()
		_ = ls.e.pager.Auth.Ensure(ls.e.ctx, conn)
	}()
}

// onReason hears the reason of every CLOSED, NEG-ERR and refusing OK of a
// remote relay from its reader before the subscription, session or
// publisher does, so that a rate limit starts the cooldown before anyone
// retries.
func (ls liveSubs) onReason(url string, source health.MessageSource, reason string) {
	ls.e.d.Health.Refused(url, source, reason, ls.e.d.Sign != nil) // a permanent refusal parks the relay
	// Any refusal backs requests off, but "auth-required:" with a key (authenticate, ask again).
	if ls.e.d.Sign == nil || relay.ReasonPrefix(reason) != relay.ReasonAuthRequired {
		ls.e.d.Pacer.Refused(url, source, reason)
	}
	if ls.e.d.Health.Observe(url, source, reason) == health.SignalRateLimited {
		at := ls.e.clock.Now()
		ls.e.post(func() {
			if r := ls.e.relays[url]; r != nil {
				r.rateLimitedAt = at
			}
		})
	}
}

// A refused REQ's filters are not live: the rebuild catches up from the
// NOTICE (deferLiveFrom), as from a CLOSED.
func (ls liveSubs) onNotice(url, text string) {
	sig, at := ls.e.d.Health.Observe(url, health.SourceNotice, text), ls.e.clock.Now()
	ls.e.d.Pacer.Refused(url, health.SourceNotice, text) // an error NOTICE backs the relay's requests off
	switch sig {
	case health.SignalTooManyFilters:
		// strfry answers a REQ over its filter count with a NOTICE ("bad
		// req: arr too big") that names none: learn from the largest live
		// REQ and rebuild them all within the bound.
		ls.e.post(func() {
			if r := ls.e.relays[url]; r != nil && r.Status.IsUp() {
				most := 0
				for _, n := range r.live {
					most = max(most, n)
				}
				ls.e.lim.LearnFilters(url, most, "NOTICE: "+text)
				ls.deferLiveFrom(r, at)
				r.rebuildLive = true
			}
		})
	case health.SignalTooManySubscriptions, health.SignalRateLimited:
		// A NOTICE names no subscription: whatever REQ it refused, rebuild
		// the live ones once the relay allows it.
		ls.e.post(func() {
			if r := ls.e.relays[url]; r != nil && r.Status.IsUp() {
				ls.deferLiveFrom(r, at)
				r.rebuildLive = true
				if sig == health.SignalRateLimited {
					r.rateLimitedAt = at
				}
			}
		})
	}
}

// waitCooldown is every remote connection's BeforeRequest (health.Gate).
func (ls liveSubs) waitCooldown(ctx context.Context, url string) error {
	return health.Gate(ctx, ls.e.d.Health, ls.e.d.Pacer, ls.e.clock, url, ls.e.m.Requests.WithLabelValues(url).Inc)
}

func (ls liveSubs) filtersOpen(r *remote) int {
	n := 0
	for _, c := range r.live {
		n += c
	}
	return n
}

// allowed tells whether new REQs may go to the relay now (no cooldown, no
// wait after a permanent refusal).
func (ls liveSubs) allowed(r *remote) bool {
	return r.Status.IsUp() && ls.e.d.Health.CooldownRemaining(r.URL) <= 0 && ls.e.d.Health.RefusalRemaining(r.URL) <= 0
}

// addFilters starts syncing new items from a relay: live subscriptions and
// a historic batch, consolidating first when the relay would carry too
// many filters or subscriptions.
func (ls liveSubs) addFilters(a repoindex.AddFilters) {
	r := ls.e.relays[a.Relay]
	if r == nil || !r.Status.IsUp() {
		return
	}
	if !ls.allowed(r) || !r.consolidateBy.IsZero() {
		r.deferred = true
		return
	}
	repos, roots := a.Items.Repos.Sorted(), a.Items.Roots.Sorted()
	ls.refsOf(r).Add(a.Items)
	if ls.deferLive(r) {
		// The relay is still syncing history: its budget goes to the
		// historic jobs, and the live filters of these items wait for
		// the consolidation that ends the pending batches.
		if r.liveDeferredAt.IsZero() {
			r.liveDeferredAt = ls.e.clock.Now()
		}
		ls.e.log.Debug("new items run their history; live subscriptions wait for the pending batches", zap.String("relay", r.URL),
			zap.Int("repos", len(repos)), zap.Int("roots", len(roots)), zap.Int("pending_batches", len(ls.e.pending[r.URL])))
		ls.e.sched.startBatch(r, a.Items, nip34.Layers23(repos, roots, ls.e.cfg.ValuesPerFilter, nil), false)
		ls.e.sched.updateRelayState(r)
		return
	}
	newFilters := nip34.Count23(len(repos), len(roots), ls.e.lim.ValuesPerFilter(r.URL))
	// Consolidate when the relay would carry more filters than the
	// threshold (or, when even its consolidated set exceeds that, half a
	// threshold more than that set), or would use its last subscription:
	// historic jobs running now hold subscriptions too.
	limit := max(ls.e.cfg.ConsolidationThreshold, r.baseline+ls.e.cfg.ConsolidationThreshold/2)
	full := ls.subsFull(r)
	grows := ls.growsInto(r, a.Items)
	if grows && full && r.running+ls.e.sched.lender(r).InUse() > 0 {
		// Its wider replacement needs a subscription the running jobs
		// hold (a consolidation frees none): asked again at the next
		// tick. With none running, live ones hold the budget: consolidated.
		r.deferred = true
		return
	}
	if (!grows && ls.filtersOpen(r)+newFilters > limit) || full {
		if len(ls.e.pending[r.URL]) > 0 {
			ls.e.log.Debug("new items wait for the consolidation", zap.String("relay", r.URL), zap.Int("repos", len(repos)), zap.Int("roots", len(roots)),
				zap.Int("pending_batches", len(ls.e.pending[r.URL])), zap.Int("live", len(r.live)), zap.Int("running", r.running))
			r.consolidateBy = ls.e.clock.Now().Add(ls.e.cfg.ConsolidationWait)
			r.deferred = true
			return
		}
		ls.consolidate(r)
	}
	// Live, Layer 3 per root by `e` and `q` in the growing subscription,
	// the rest by the kind subscription (opened now if no root had it
	// open): per-root `E` filters beside them would bring each top-level
	// comment twice.
	if len(roots) > 0 {
		ls.openKindSub(r, nostr.Timestamp(ls.e.clock.Now().Unix()))
	}
	ls.growLive(r, a.Items)
	ls.e.sched.startBatch(r, a.Items, nip34.Layers23(repos, roots, ls.e.cfg.ValuesPerFilter, nil), false)
	ls.e.sched.updateRelayState(r)
}

// deferLive tells whether new items of r open no live per-root
// subscriptions now: r's first sync has pending historic batches, so each
// subscription the live filters took would be a historic job less, and a
// distant relay ran its hundreds of jobs of two round trips each one at a
// time. Not after it: new roots arriving steadily, each with a small
// batch, kept deferring one another and consolidated every second. Their history runs at once; the
// consolidation when the batches are done (or Config.LiveDeferMax after
// the first deferred item, onTick) opens their live filters with since
// reaching back to when the first of them was added. Layer 1 stays live.
func (ls liveSubs) deferLive(r *remote) bool {
	return ls.e.cfg.LiveDeferMax > 0 && !r.HistoricDone && len(ls.e.pending[r.URL]) > 0
}

// liveDeferDue tells whether r's deferred live filters have waited
// Config.LiveDeferMax: they are opened even though batches are pending.
func (ls liveSubs) liveDeferDue(r *remote, now time.Time) bool {
	return !r.liveDeferredAt.IsZero() && !now.Before(r.liveDeferredAt.Add(ls.e.cfg.LiveDeferMax))
}
