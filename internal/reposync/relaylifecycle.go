package reposync

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// connectDue starts a dial for every tracked, disconnected relay whose
// backoff has elapsed.
func (e *Engine) connectDue() {
	if !e.disc.Ready() {
		// Remote relays wait until the own relay's history has been read
		// and the local set filled: publishing meanwhile would put events
		// with old created_at into the range being paged, and a relay
		// delivering them live inside a page (khatru does) would make the
		// pager step over stored events.
		return
	}
	for _, url := range e.d.Health.Due() {
		r := e.relays[url]
		if r == nil || r.Status != repoindex.Disconnected {
			continue
		}
		if !e.d.Pacer.Allow(url) {
			continue // a dial is a request too: due again at the next tick
		}
		e.dial(r)
	}
}

func (e *Engine) dial(r *remote) {
	e.nextGen++
	gen := e.nextGen
	r.gen = gen
	r.Status = repoindex.Connecting
	e.m.RelayConnected.WithLabelValues(r.URL).Set(float64(repoindex.Connecting))
	e.d.Health.AttemptStarted(r.URL)
	timeout := min(e.d.Health.ConnectTimeout(r.URL), e.cfg.ConnectTimeout)
	if timeout <= 0 {
		timeout = e.cfg.ConnectTimeout
	}
	url := r.URL
	opts := e.remoteOptions(url)
	opts.OnFrame = health.OnFirstAnswer(opts.OnFrame, func() { e.d.Health.Achieved(url) }) // this connection's
	// A resumed sync keeps the NIP-11 limits its last connection read.
	limits := e.d.Limits != nil && !r.resumeSync
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(e.ctx, timeout)
		conn, err := e.d.Dial(ctx, url, opts)
		cancel()
		if err == nil && limits {
			lctx, lcancel := context.WithTimeout(e.ctx, timeout)
			if l, lerr := e.d.Limits(lctx, url); lerr == nil {
				e.d.Health.SetLimits(url, l)
			}
			lcancel()
		}
		e.post(func() { e.onDialed(url, gen, conn, err) })
		if err == nil && e.ctx.Err() != nil {
			conn.Close()
		}
	}()
}

// remoteOptions are the connection options of remote relay url: every
// NOTICE and every CLOSED, NEG-ERR and refusing OK reason goes through the
// health tracker's classifier (a rate limit starts the cooldown), and no
// REQ or NEG-OPEN is sent while the cooldown runs.
func (e *Engine) remoteOptions(url string) relay.Options {
	opts := e.d.RelayOptions
	opts.OnNotice = func(text string) { e.subs.onNotice(url, text) }
	opts.OnFrame = e.d.Pacer.OnAnswer(url, opts.OnFrame) // an answer ends a refusal backoff
	opts.BeforeRequest = func(ctx context.Context) error { return e.subs.waitCooldown(ctx, url) }
	opts.OnClosed = func(_, reason string) { e.subs.onReason(url, health.SourceClosed, reason) }
	opts.OnClosedTagValues = func(reason string, most int) {
		if health.ClassifyMessage(reason) == health.SignalTooManyTagValues {
			e.lim.LearnTagValues(url, most, "CLOSED: "+reason)
		}
	}
	opts.OnNegErr = func(_, reason string) { e.subs.onReason(url, health.SourceNegErr, reason) }
	opts.OnOK = func(_ string, ok bool, reason string) {
		if !ok {
			e.subs.onReason(url, health.SourceOK, reason)
		}
	}
	opts.OnChallenge = func(string) { e.post(func() { e.subs.onChallenge(url) }) }
	if e.h != nil {
		opts.OnDropped = e.h.Invalid
	}
	opts.Logger = e.log
	return opts
}

func (e *Engine) onDialed(url string, gen uint64, conn *relay.Conn, err error) {
	r := e.relays[url]
	if r == nil || r.gen != gen || r.Status != repoindex.Connecting {
		if conn != nil {
			conn.Close()
		}
		return
	}
	if err != nil {
		r.Status = repoindex.Disconnected
		r.failures++
		r.lastError = err.Error()
		if r.DisconnectedAt.IsZero() {
			r.DisconnectedAt = e.clock.Now()
		}
		e.d.Health.Failed(url, err)
		e.m.ConnectionAttempts.WithLabelValues(url, "failure").Inc()
		e.m.RelayConnected.WithLabelValues(url).Set(float64(repoindex.Disconnected))
		// The health tracker logs the failure (once, with its backoff).
		return
	}
	e.m.ConnectionAttempts.WithLabelValues(url, "success").Inc()
	e.d.Health.Connected(url)
	if conn.Challenge() != "" {
		defer e.subs.onChallenge(url) // a relay that challenges at once
	}
	ctx, cancel := context.WithCancel(e.ctx)
	r.conn, r.cancel = conn, cancel
	cmds := make(chan func(*relay.Conn), 1024)
	r.cmds = cmds
	r.live, r.replaces = map[string]int{}, nil
	r.jobs, r.running = nil, 0
	e.wg.Add(2)
	go func() { // writer: runs subscribe/close commands in order
		defer e.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case fn := <-cmds:
				fn(conn)
			}
		}
	}()
	go func() { // watcher
		defer e.wg.Done()
		select {
		case <-conn.Done():
			err := conn.Err()
			e.lim.LearnMessageSize(url, conn, err)
			e.post(func() { e.onDisconnected(url, gen, err) })
		case <-ctx.Done():
		}
	}()
	e.connectOrReconnect(r)
}

// connectOrReconnect is the one handler of every connection: fresh sync for a
// first connection or after a long absence, catch-up with since for a quick
// reconnect (one that dropped during the first historic sync resumes it:
// its Layer 1 and the items not confirmed are asked again, each sweep
// going on where it got to: sweepcursor); then compute_actions for new
// items.
func (e *Engine) connectOrReconnect(r *remote) {
	now := e.clock.Now()
	fresh := e.needsFreshSync(r, now)
	resume := !fresh && !r.HistoricDone
	disconnectedAt := r.DisconnectedAt
	r.resumeSync = false
	if fresh {
		// Everything is fetched again: failed batches with it.
		r.ClearConfirmed()
		r.failed, r.parked = nil, nil
		r.HistoricDone = false
		e.pager.Resume.Forget(r.URL)
	}
	r.Status = repoindex.Syncing
	r.LastConnected, r.gotAtConnect = now, r.historicGot.Load()
	r.DisconnectedAt = time.Time{}
	r.lastError = ""
	r.failures = 0
	if r.fullResyncAt.IsZero() || fresh {
		r.fullResyncAt = now.Add(e.fullResyncInterval())
	}
	if fresh {
		r.catchup, r.catchupFrom, r.window, r.windowFrom = nil, time.Time{}, nil, time.Time{}
		e.log.Info("relay connected: fresh sync", zap.String("relay", r.URL))
		e.subs.subscribeLayer1(r)
		e.sched.startBatch(r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	} else {
		// Live subscriptions for what is confirmed, opened with since =
		// disconnect − since_buffer (− consolidation_overlap on a NIP-77
		// relay, below; disconnectedAt is earlier when a
		// catch-up had not completed or live filters were deferred:
		// catchUpFrom): their stored events before EOSE are
		// the catch-up batch (each filter is sent once), and a filter
		// whose answer reaches the relay's cap is paged on with REQs (a
		// relay capping a REQ at 500 does not hide the rest). Failed
		// batches keep waiting for their retry.
		since := nostr.Timestamp(disconnectedAt.Add(-e.cfg.SinceBuffer).Unix())
		items := repoindex.NewItems()
		items.Repos.AddAll(r.Confirmed.Repos)
		items.Roots.AddAll(r.Confirmed.Roots)
		r.window, r.windowFrom = nil, time.Time{} // a pending one is in disconnectedAt
		if e.neg != nil && e.neg.Support(r.URL) == "supported" && e.cfg.SinceBuffer > e.cfg.ConsolidationOverlap {
			// NIP-77: the subscriptions ask from the disconnection
			// (− consolidation_overlap); the since_buffer before it,
			// where events stored late with an older created_at would
			// be, is reconciled, so what was seen is not sent again.
			from := nostr.Timestamp(disconnectedAt.Add(-e.cfg.ConsolidationOverlap).Unix())
			r.window, r.windowFrom = &repoindex.PendingBatch{Items: repoindex.NewItems(), Catchup: true}, disconnectedAt
			e.sched.queueJob(r, r.window, nip34.Window(items.Repos.Sorted(), items.Roots.Sorted(), e.cfg.ValuesPerFilter, since, from), false)
			since = from
		}
		if resume {
			e.log.Info("relay reconnected: resuming its historic sync", zap.String("relay", r.URL), zap.Time("since", since.Time()))
			e.sched.startBatch(r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
		} else {
			e.log.Info("relay reconnected: catching up", zap.String("relay", r.URL), zap.Time("since", since.Time()))
		}
		r.catchup, r.catchupFrom = e.subs.subscribeSince(r, items, since), disconnectedAt
		r.baseline = e.subs.filtersOpen(r)
		e.requeueParked(r)
	}
	e.recomputeRelay(r.URL)
	e.sched.updateRelayState(r)
}

// requeueParked asks again for the items of the batches a dropped
// connection left pending, batch by batch: each batch's filters are the
// ones it had, so their sweeps go on where they got to (sweepcursor).
// Items no longer wanted are left out; the rest of what is new is
// recomputeRelay's.
func (e *Engine) requeueParked(r *remote) {
	parked := r.parked
	r.parked = nil
	if len(parked) == 0 {
		return
	}
	want := repoindex.RelayActions(e.disc.Repos, r.URL, e.bootstrapOK[r.URL] && e.cfg.BootstrapAllLayers, e.pending[r.URL], &r.RelayState)
	for _, items := range parked {
		if keep := items.Within(want); !keep.Empty() {
			e.subs.addFilters(repoindex.AddFilters{Relay: r.URL, Items: keep})
		}
	}
}

func (e *Engine) fullResyncInterval() time.Duration {
	span := e.cfg.FullResyncMax - e.cfg.FullResyncMin
	if span <= 0 {
		return e.cfg.FullResyncMin
	}
	return e.cfg.FullResyncMin + time.Duration(rand.Int64N(int64(span)))
}

// onDisconnected: pending batches are cleared, disconnected_at set, the
// health tracker told.
func (e *Engine) onDisconnected(url string, gen uint64, err error) {
	r := e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	// A catch-up that did not complete, or items confirmed without their
	// live filters, catch up from then.
	from := catchUpFrom(r, e.clock.Now())
	inProgress := !r.HistoricDone || len(e.pending[url]) > 0 // a later batch is a sync too
	r.parked = nil
	for _, b := range e.pending[url] {
		if !r.HistoricDone && !b.Catchup && b.Retry == nil {
			r.parked = append(r.parked, b.Items) // resumed batch by batch (requeueParked)
		}
	}
	e.teardown(r)
	r.Status = repoindex.Disconnected
	r.DisconnectedAt = from
	r.resumeSync = !r.HistoricDone // a quick reconnect resumes it
	if err != nil {
		r.lastError = err.Error()
	}
	// One that lived reconnect_wait or longer (a slow reader) waits it.
	lived := e.clock.Now().Sub(r.LastConnected) < e.d.Health.Config().ReconnectWait
	if inProgress && r.historicGot.Load() > r.gotAtConnect && relay.ClosedInOrder(err) && lived {
		e.d.Health.Delivered(url) // the sync resumes after health.resume_wait
	}
	e.d.Health.Failed(url, err)
	e.m.RelayConnected.WithLabelValues(url).Set(float64(repoindex.Disconnected))
	// The health tracker logs "relay disconnected" with its backoff. A
	// wait shorter than a tick is kept to (a timer), not rounded up.
	if _, wait := e.d.Health.CanAttempt(url); wait > 0 && wait < e.cfg.Tick {
		e.clock.AfterFunc(wait, func() { e.post(e.connectDue) })
	}
}

// teardown stops a relay's connection goroutines and clears its pending
// batches and live subscriptions.
func (e *Engine) teardown(r *remote) {
	e.sched.parkRetries(r)
	if r.cancel != nil {
		r.cancel()
	}
	if r.conn != nil {
		conn := r.conn
		go conn.Close()
	}
	r.conn, r.cancel, r.cmds = nil, nil, nil
	r.live, r.jobs, r.running, r.baseline = nil, nil, 0, 0
	r.refs = nil
	r.since = nil
	r.consolidateBy, r.liveDeferredAt = time.Time{}, time.Time{}
	r.rebuildLive, r.deferred = false, false
	r.rebuild.Reset()
	delete(e.pending, r.URL)
	r.pendingRepos, r.pendingRoots = 0, 0
	e.m.PendingBatches.WithLabelValues(r.URL).Set(0)
	e.m.FiltersOpen.WithLabelValues(r.URL).Set(0)
}

// dropConnection closes a relay's connection on purpose.
func (e *Engine) dropConnection(url string) {
	r := e.relays[url]
	if r == nil {
		return
	}
	e.teardown(r)
	r.Status = repoindex.Disconnected
}

// forget disconnects a relay and stops tracking it.
func (e *Engine) forget(url string) {
	e.dropConnection(url)
	delete(e.relays, url)
	if !e.trustedOK[url] {
		e.d.Health.Forget(url)
		e.neg.Forget(url) // trusted relays' reconciliations go on
	}
	e.m.ForgetRelay(url)
	e.d.Pacer.Forget(url)
	e.pager.Truncation.Forget(url)
	e.pager.Auth.Forget(url)
	e.pager.Resume.Forget(url)
	e.log.Info("relay dropped: nothing to sync", zap.String("relay", url))
}
