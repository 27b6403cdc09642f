package reposync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// runSelfSubscriber keeps a subscription on the own relay for the kinds
// that define what we sync, reconnecting with capped backoff. The first
// connection asks for everything; later ones for since = last seen −
// since_buffer.
func (e *Engine) runSelfSubscriber(ctx context.Context) {
	log := e.log.Named("self")
	lastSeen := e.restoredSelfSeen // zero without a state store
	restored := !lastSeen.IsZero()
	retry := backoff.Policy{Base: e.cfg.OwnReconnectBase, Max: e.cfg.OwnReconnectMax}
	failures := 0
	for ctx.Err() == nil {
		opts := e.d.RelayOptions
		opts.Logger = log
		dctx, cancel := context.WithTimeout(ctx, e.cfg.ConnectTimeout)
		conn, err := e.d.DialOwn(dctx, e.cfg.OwnRelay, opts)
		cancel()
		if err != nil {
			failures++
			if failures == 1 || failures%10 == 0 {
				log.Warn("cannot connect to own relay", zap.String("relay", e.cfg.OwnRelay), zap.Int("failures", failures), zap.Error(err))
			}
			if e.sleep(ctx, retry.Delay(failures, 0)) != nil {
				return
			}
			continue
		}
		if failures > 0 || !lastSeen.IsZero() {
			log.Info("connected to own relay", zap.String("relay", e.cfg.OwnRelay))
		}
		failures = 0
		e.ownUp.Store(true)
		var since *nostr.Timestamp
		if !lastSeen.IsZero() {
			ts := nostr.Timestamp(lastSeen.Add(-e.cfg.SinceBuffer).Unix())
			since = &ts
		}
		complete, err := e.selfSession(ctx, conn, since, restored)
		e.ownUp.Store(false)
		e.selfLive.Store(false)
		if complete {
			restored = false
			e.restoredHeads = nil // applied; a replaced one's JSON is not pinned
			// Everything stored up to the session's start was paged and the
			// live subscription saw the rest: the next session may start
			// from here. After an incomplete paging it pages the same range
			// again (everything, on a first start). Not past history
			// batches still waiting to be applied (selfSeenTime).
			if e.historyBatches.Load() == 0 {
				lastSeen = e.clock.Now()
				e.selfSeen.Store(lastSeen.UnixNano())
			}
		}
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		log.Warn("own relay connection lost; reconnecting", zap.Error(err))
	}
}

// batched is ev as a self batch keeps it until applySelfBatch: without the
// content of the roots (a patch's diff), which it does not read;
// announcements and states stay whole (noteHead keeps them as JSON).
func batched(ev *nostr.Event) *nostr.Event {
	if ev.Content == "" || isHeadKind(ev.Kind) {
		return ev
	}
	c := *ev
	c.Content = ""
	return &c
}

// selfHistoryBatch is how many paged events make one self batch.
const selfHistoryBatch = 1000

// selfHistory pages backwards through the own relay's events of the
// self-subscriber kinds (since, when set) and applies them in batches.
// Pages come newest first, so roots can precede their announcement; the
// engine keeps such roots until the announcement arrives.
func (e *Engine) selfHistory(ctx context.Context, conn *relay.Conn, since *nostr.Timestamp, restored bool) error {
	start := e.clock.Now()
	var batch []*nostr.Event
	total := 0
	flush := func() {
		evs := batch
		batch = nil
		// Announcements first: a state or PR the page brought before its
		// announcement finds its repository hosted.
		slices.SortStableFunc(evs, func(a, b *nostr.Event) int { return historic.PublishRank(a.Kind) - historic.PublishRank(b.Kind) })
		for i, ev := range evs {
			e.h.OnOwnRelay(ev)
			evs[i] = batched(ev)
		}
		if len(evs) > 0 {
			// Not noted as unapplied roots: until the batch is applied the
			// saved cursor stays before the paging (selfSeenTime), and a
			// restart pages them again.
			e.historyBatches.Add(1)
			e.post(func() {
				e.applySelfBatch(evs)
				e.historyBatches.Add(-1)
			})
		}
	}
	emit := func(_ context.Context, in ingest.Incoming) error {
		batch = append(batch, in.Event)
		total++
		if len(batch) >= selfHistoryBatch {
			flush()
		}
		return nil
	}
	err := e.pager.Sync(ctx, conn, e.selfHistoryFilters(since, restored), 1, emit)
	if err == nil && restored && since != nil && e.headsUsable() {
		err = e.selfHeads(ctx, conn, since, emit)
	}
	flush()
	if err != nil && errors.Is(err, historic.ErrSaturatedSecond) && ctx.Err() == nil {
		// The rest of the history was read; waiting would not get past a
		// second holding more events than the relay returns per REQ.
		e.log.Warn("some seconds of the own relay's history hold more announcements or roots than it returns per REQ; those beyond are not seen until they change", zap.Error(err))
		err = nil
	}
	if err != nil {
		return fmt.Errorf("paging the own relay's announcements and roots: %w", err)
	}
	e.log.Info("read the own relay's announcements and roots", zap.Int("events", total), zap.Duration("took", e.clock.Now().Sub(start)))
	return nil
}

// selfSession watches the own relay until the connection ends: a live
// subscription (limit 0, so an event is delivered whatever its created_at)
// opened first, and alongside it a paged read of what the relay already
// holds (since, when set), so that nothing published in between is missed.
// A single REQ would get only the newest few hundred stored events from a
// relay that caps results (strfry: 500). Applying an event twice is
// harmless. The sidecar's initial fill starts once the paging is done.
// Live events are batched: a batch is applied once the stream has been quiet
// for BatchQuiet (a single announcement starts syncing at once), and at the
// latest BatchWindow after its first event (a burst is applied in bulk).
//
// complete reports whether the paging finished.
func (e *Engine) selfSession(ctx context.Context, conn *relay.Conn, since *nostr.Timestamp, restored bool) (complete bool, err error) {
	sub, err := conn.Subscribe(ctx, "self", nip34.Live([]nostr.Filter{{Kinds: e.cfg.SelfKinds}}))
	if err != nil {
		return false, err
	}
	defer sub.Close()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	history := make(chan error, 1)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		err := e.selfHistory(hctx, conn, since, restored)
		if err == nil {
			e.post(func() {
				// Roots still waiting now have no announcement on the own
				// relay: they would wait forever.
				e.dropOrphans()
				e.startInitialFill(ctx)
			})
		}
		history <- err
	}()

	var batch []*nostr.Event
	var window, quietC <-chan time.Time
	var timer, quiet clock.Alarm
	live := false // the subscription's EOSE came: what follows is new
	flush := func() {
		evs := batch
		batch = nil
		if timer != nil {
			timer.Stop()
			timer, window = nil, nil
		}
		if quiet != nil {
			quiet.Stop()
			quiet, quietC = nil, nil
		}
		if len(evs) > 0 {
			e.post(func() { e.applySelfBatch(evs) })
		}
	}
	defer flush()
	for {
		select {
		case <-ctx.Done():
			return complete, ctx.Err()
		case <-conn.Done():
			return complete, conn.Err()
		case err := <-history:
			history = nil
			if err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				return false, err // a new session pages again
			}
			complete = true
			e.selfLive.Store(true) // history read, the live subscription sees the rest
		case <-window:
			flush()
		case <-quietC:
			flush()
		case m, ok := <-sub.Messages():
			if !ok {
				return complete, conn.Err()
			}
			switch m.Type {
			case relay.MsgEOSE:
				live = true
			case relay.MsgEvent:
				e.noteRoot(m.Event) // before the local index has it
				if live {
					e.h.OnOwnRelayLive(m.Event)
				} else {
					// Stored before: a relay that ignores limit 0.
					e.h.OnOwnRelay(m.Event)
				}
				batch = append(batch, batched(m.Event))
				if timer == nil {
					timer = e.clock.NewTimer(e.cfg.BatchWindow)
					window = timer.C()
				}
				if q := e.cfg.BatchQuiet; q > 0 {
					if quiet == nil {
						quiet = e.clock.NewTimer(q)
						quietC = quiet.C()
					} else {
						quiet.Reset(q)
					}
				}
			case relay.MsgClosed:
				e.log.Warn("own relay closed the self-subscription", zap.String("reason", m.Reason))
				return complete, nil
			}
		}
	}
}

// startInitialFill reads the own relay's events for everything the sync
// layers cover into the local set (negentropy's Phase 0), then declares the
// sidecar ready. Without a local set it is ready at once. It runs on the
// Run goroutine; the fill itself on its own.
func (e *Engine) startInitialFill(ctx context.Context) {
	if e.local == nil {
		e.ready.Store(true)
		e.connectDue()
		return
	}
	repos, roots := e.reposAndRoots()
	restored := e.d.LocalRestored && !e.catchUpTried
	e.catchUpTried = true
	early := e.earlyCatchUp
	e.earlyCatchUp = nil
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if restored || early != nil {
			caughtUp := false
			if early != nil {
				select {
				case caughtUp = <-early:
				case <-ctx.Done():
				}
			} else {
				caughtUp = e.catchUp(ctx, repos, roots.Sorted())
			}
			if caughtUp {
				e.ready.Store(true)
				e.post(e.connectDue)
				return
			}
			if ctx.Err() != nil {
				return
			}
			// What the restored index holds cannot be checked: an event
			// it lists that the own relay lost would never be fetched.
			e.local.Index().Clear()
		}
		start := e.clock.Now()
		e.local.Reset()
		if err := e.local.FillItems(ctx, true, repos, roots.Sorted()); err != nil {
			if ctx.Err() == nil {
				e.log.Warn("filling the local set from the own relay failed; reconciliations will fill it per filter", zap.Error(err))
			}
		} else {
			e.log.Info("local set filled from the own relay", zap.Int("events", e.local.Index().Len()),
				zap.Int("repos", len(repos)), zap.Int("roots", roots.Len()), zap.Duration("took", e.clock.Now().Sub(start)))
		}
		e.ready.Store(true)
		e.post(e.connectDue) // remote relays waited for this
	}()
}

// catchUp reconciles the restored local index against the own relay; it
// reports false when the caller must read back instead.
func (e *Engine) catchUp(ctx context.Context, repos, roots []string) bool {
	opts := e.cfg.Negentropy.Options
	opts.Clock = e.clock
	before := e.local.Index().Len()
	removed, err := e.local.CatchUp(ctx, opts, e.cfg.Negentropy.FetchBatch, true, repos, roots)
	e.caughtMu.Lock()
	caught := e.caught
	e.caught = nil
	e.caughtMu.Unlock()
	e.caughtUpSelf(caught)
	switch {
	case err == nil:
		if removed > max(lostMin, before/10) {
			e.forgetConfirmed(ctx, removed)
		}
		return true
	case ctx.Err() != nil:
		return false
	case errors.Is(err, neg.ErrUnsupported):
		e.log.Info("the own relay does not speak NIP-77; filling the restored local index by reading its events back")
	default:
		e.log.Warn("catching up with the own relay by NIP-77 failed; reading its events back", zap.Error(err))
	}
	return false
}
