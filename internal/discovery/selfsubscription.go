package discovery

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
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
)

// runSelfSubscriber keeps a subscription on the own relay for the kinds
// that define what we sync, reconnecting with capped backoff. The first
// connection asks for everything; later ones for since = last seen −
// since_buffer. The local set is filled after the first session's paging,
// and again only after one that follows an outage longer than
// quick_reconnect_window (refill): an own relay that drops connections
// every few seconds is not read back whole at each reconnect.
func (d *Discovery) runSelfSubscriber(ctx context.Context) {
	log := d.log.Named("self")
	lastSeen := d.restoredSelfSeen // zero without a state store
	restored := !lastSeen.IsZero()
	retry := backoff.Policy{Base: d.cfg.OwnReconnectBase, Max: d.cfg.OwnReconnectMax}
	failures := 0
	var lost time.Time // when the last session ended
	for ctx.Err() == nil {
		opts := d.deps.RelayOptions
		opts.Logger = log
		dctx, cancel := context.WithTimeout(ctx, d.cfg.ConnectTimeout)
		conn, err := d.deps.DialOwn(dctx, d.cfg.OwnRelay, opts)
		cancel()
		if err != nil {
			failures++
			if failures == 1 || failures%10 == 0 {
				log.Warn("cannot connect to own relay", zap.String("relay", d.cfg.OwnRelay), zap.Int("failures", failures), zap.Error(err))
			}
			if d.sleep(ctx, retry.Delay(failures, 0)) != nil {
				return
			}
			continue
		}
		if failures > 0 || !lastSeen.IsZero() {
			log.Info("connected to own relay", zap.String("relay", d.cfg.OwnRelay))
		}
		failures = 0
		d.ownUp.Store(true)
		var since *nostr.Timestamp
		if !lastSeen.IsZero() {
			ts := nostr.Timestamp(lastSeen.Add(-d.cfg.SinceBuffer).Unix())
			since = &ts
		}
		refill := lost.IsZero() || d.clock.Now().Sub(lost) > d.cfg.QuickReconnectWindow
		complete, err := d.selfSession(ctx, conn, since, restored, refill)
		lost = d.clock.Now()
		d.ownUp.Store(false)
		d.selfLive.Store(false)
		if complete {
			restored = false
			d.restoredHeads = nil // applied; a replaced one's JSON is not pinned
			// Everything stored up to the session's start was paged and the
			// live subscription saw the rest: the next session may start
			// from here. After an incomplete paging it pages the same range
			// again (everything, on a first start). Not past history
			// batches still waiting to be applied (selfSeenTime).
			if d.historyBatches.Load() == 0 {
				lastSeen = d.clock.Now()
				d.selfSeen.Store(lastSeen.UnixNano())
			}
		}
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		log.Warn("own relay connection lost; reconnecting", zap.Error(err))
	}
}

// batched is ev as a self batch keeps it until ApplyBatch: without the
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
func (d *Discovery) selfHistory(ctx context.Context, conn *relay.Conn, since *nostr.Timestamp, restored bool) error {
	start := d.clock.Now()
	var batch []*nostr.Event
	total := 0
	flush := func() {
		evs := batch
		batch = nil
		// Announcements first: a state or PR the page brought before its
		// announcement finds its repository hosted.
		slices.SortStableFunc(evs, func(a, b *nostr.Event) int { return historic.PublishRank(a.Kind) - historic.PublishRank(b.Kind) })
		for i, ev := range evs {
			d.h.OnOwnRelay(ev)
			evs[i] = batched(ev)
		}
		if len(evs) > 0 {
			// Not noted as unapplied roots: until the batch is applied the
			// saved cursor stays before the paging (selfSeenTime), and a
			// restart pages them again.
			d.historyBatches.Add(1)
			d.deps.Post(func() {
				d.ApplyBatch(evs)
				d.historyBatches.Add(-1)
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
	err := d.pager.Sync(ctx, conn, d.selfHistoryFilters(since, restored), 1, emit)
	if err == nil && restored && since != nil && d.headsUsable() {
		err = d.selfHeads(ctx, conn, since, emit)
	}
	flush()
	if historic.OnlyCutTies(err) && ctx.Err() == nil {
		// The rest of the history was read; reading again would not get
		// past a second holding more events than the relay returns per
		// REQ that neither NIP-77 nor a split filter read whole. The
		// pager's Truncation warned and keeps the sidecar from saying it
		// caught up (TiesCut).
		err = nil
	}
	if err != nil {
		return fmt.Errorf("paging the own relay's announcements and roots: %w", err)
	}
	d.log.Info("read the own relay's announcements and roots", zap.Int("events", total), zap.Duration("took", d.clock.Now().Sub(start)))
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
// for BatchQuiet (a single announcement starts syncing at once), at the
// latest BatchWindow after its first event (a burst is applied in bulk),
// and once it holds BatchMax events.
//
// Once the paging is done, the local set is filled (startInitialFill)
// when refill is set or the sidecar is not ready yet; else what it was
// filled with stays, and what others stored on the own relay meanwhile is
// at worst downloaded again (a reconciliation takes it for missing; the
// own relay answers duplicate), never lost.
//
// complete reports whether the paging finished.
func (d *Discovery) selfSession(ctx context.Context, conn *relay.Conn, since *nostr.Timestamp, restored, refill bool) (complete bool, err error) {
	sub, err := conn.Subscribe(ctx, "self", nip34.Live([]nostr.Filter{{Kinds: d.cfg.SelfKinds}}))
	if err != nil {
		return false, err
	}
	defer sub.Close()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	history := make(chan error, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		// A paging cut short continues where it got to (the pager's
		// sweep cursor): an own relay that drops connections before a
		// long history is read through is not paged from the top again
		// and again. What is stored meanwhile with an older created_at
		// than the top-up reaches back: before the sidecar is ready it
		// publishes nothing; after, the roots it publishes are noted
		// (UnappliedRoots) and applied within root_wait.
		err := d.selfHistory(sweepcursor.With(hctx), conn, since, restored)
		if err == nil {
			d.deps.Post(func() {
				// Roots still waiting now have no announcement on the own
				// relay: they would wait forever.
				d.dropOrphans()
				if refill || !d.ready.Load() {
					d.startInitialFill(ctx)
				}
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
			d.deps.Post(func() { d.ApplyBatch(evs) })
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
			d.selfLive.Store(true) // history read, the live subscription sees the rest
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
				d.NoteRoot(m.Event) // before the local index has it
				if live {
					d.h.OnOwnRelayLive(m.Event)
				} else {
					// Stored before: a relay that ignores limit 0.
					d.h.OnOwnRelay(m.Event)
				}
				batch = append(batch, batched(m.Event))
				if n := d.cfg.BatchMax; n > 0 && len(batch) >= n {
					flush() // a first sync's echoes: their Layer 3 starts now
					continue
				}
				if timer == nil {
					timer = d.clock.NewTimer(d.cfg.BatchWindow)
					window = timer.C()
				}
				if q := d.cfg.BatchQuiet; q > 0 {
					if quiet == nil {
						quiet = d.clock.NewTimer(q)
						quietC = quiet.C()
					} else {
						quiet.Reset(q)
					}
				}
			case relay.MsgClosed:
				d.log.Warn("own relay closed the self-subscription", zap.String("reason", m.Reason))
				return complete, nil
			}
		}
	}
}

// startInitialFill reads the own relay's events for everything the sync
// layers cover into the local set (the fill before any reconciliation), then declares the
// sidecar ready. Without a local set it is ready at once. It runs on the
// Run goroutine; the fill itself on its own.
func (d *Discovery) startInitialFill(ctx context.Context) {
	if d.local == nil {
		d.ready.Store(true)
		d.deps.Ready()
		return
	}
	repos, roots := d.reposAndRoots()
	restored := d.deps.LocalRestored && !d.catchUpTried
	d.catchUpTried = true
	early := d.earlyCatchUp
	d.earlyCatchUp = nil
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if restored || early != nil {
			caughtUp := false
			if early != nil {
				select {
				case caughtUp = <-early:
				case <-ctx.Done():
				}
			} else {
				caughtUp = d.catchUp(ctx, repos, roots.Sorted())
			}
			if caughtUp {
				d.ready.Store(true)
				d.deps.Post(d.deps.Ready)
				return
			}
			if ctx.Err() != nil {
				return
			}
			// What the restored index holds cannot be checked: an event
			// it lists that the own relay lost would never be fetched.
			d.local.Index().Clear()
		}
		start := d.clock.Now()
		d.local.Reset()
		if err := d.local.FillItems(ctx, true, repos, roots.Sorted()); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("filling the local set from the own relay failed; reconciliations will fill it per filter", zap.Error(err))
			}
		} else {
			d.log.Info("local set filled from the own relay", zap.Int("events", d.local.Index().Len()),
				zap.Int("repos", len(repos)), zap.Int("roots", roots.Len()), zap.Duration("took", d.clock.Now().Sub(start)))
		}
		d.ready.Store(true)
		d.deps.Post(d.deps.Ready) // remote relays waited for this
	}()
}

// catchUp reconciles the restored local index against the own relay; it
// reports false when the caller must read back instead.
func (d *Discovery) catchUp(ctx context.Context, repos, roots []string) bool {
	opts := d.cfg.Negentropy.SessionOptions()
	opts.Clock = d.clock
	before := d.local.Index().Len()
	removed, err := d.local.CatchUp(ctx, opts, d.cfg.Negentropy.FetchBatch, true, repos, roots)
	d.caughtMu.Lock()
	caught := d.caught
	d.caught = nil
	d.caughtMu.Unlock()
	d.caughtUpSelf(caught)
	switch {
	case err == nil:
		if removed > max(lostMin, before/10) {
			d.deps.ForgetConfirmed(ctx, removed)
		}
		return true
	case ctx.Err() != nil:
		return false
	case errors.Is(err, neg.ErrUnsupported):
		d.log.Info("the own relay does not speak NIP-77; filling the restored local index by reading its events back")
	default:
		d.log.Warn("catching up with the own relay by NIP-77 failed; reading its events back", zap.Error(err))
	}
	return false
}
