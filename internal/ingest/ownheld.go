package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// DefaultOwnHeldRecheck is how long after a GRASP own relay accepted an
// event into its purgatory (OK true "purgatory: …") the event is published
// again if the own relay has not served it: just past GRASP-01's 30-minute
// discard. A "duplicate:" answer then means the relay has it; another
// "purgatory:" starts a new wait.
const DefaultOwnHeldRecheck = 31 * time.Minute

// ownHeld remembers the events the own relay accepted without serving them
// yet. They are not counted present (LocalIndex, negentropy's local set)
// until the relay serves them (the self-subscription sees them, or a later
// publish answers duplicate). One still unserved after the recheck delay
// is published again, through the purgatory when it needs git data, so an
// event the relay discarded comes back once its git data can be had.
type ownHeld struct {
	mu  sync.Mutex
	max int
	evs map[event.ID]heldEvent
}

type heldEvent struct {
	ev *nostr.Event
	at time.Time
}

func newOwnHeld(max int) *ownHeld { return &ownHeld{max: max, evs: map[event.ID]heldEvent{}} }

// add records ev as held since at; it reports false when the set is full.
func (o *ownHeld) add(id event.ID, ev *nostr.Event, at time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.evs[id]; !ok && len(o.evs) >= o.max {
		return false
	}
	o.evs[id] = heldEvent{ev: ev, at: at}
	return true
}

// forget forgets id: the own relay serves it, or refused it.
func (o *ownHeld) forget(id event.ID) {
	o.mu.Lock()
	delete(o.evs, id)
	o.mu.Unlock()
}

// due returns the events held since before cutoff and restarts their wait
// at now: they stay counted as held while they are published again, until
// the own relay's answer settles them (served, held anew, or refused).
func (o *ownHeld) due(cutoff, now time.Time) []idEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []idEvent
	for id, h := range o.evs {
		if h.at.Before(cutoff) {
			out = append(out, idEvent{id: id, ev: h.ev})
			o.evs[id] = heldEvent{ev: h.ev, at: now}
		}
	}
	return out
}

func (o *ownHeld) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.evs)
}

// onHeld records an event the own relay answered "purgatory:" for.
func (h *Handler) onHeld(id event.ID, ev *nostr.Event) {
	if !h.held.add(id, ev, h.clock.Now()) {
		// Full: forget it, so the next sync fetches it again.
		h.m.limitHits.WithLabelValues("own_purgatory").Inc()
		h.seen.Forget(id)
		return
	}
	h.m.ownHeld.Set(float64(h.held.len()))
}

// notHeld forgets a held event the own relay now serves or refused.
func (h *Handler) notHeld(id event.ID) {
	h.held.forget(id)
	h.m.ownHeld.Set(float64(h.held.len()))
}

// recheckHeld publishes again the events the own relay has held for longer
// than the recheck delay without serving them.
func (h *Handler) recheckHeld(ctx context.Context) {
	now := h.clock.Now()
	evs := h.held.due(now.Add(-h.cfg.OwnPurgatoryRecheck), now)
	for _, r := range evs {
		h.m.ownHeldRepublished.Inc()
		h.pending.Add(1)
		select {
		case h.retries <- r:
		case <-ctx.Done():
			h.pending.Add(-1)
			return
		}
	}
}

// runHeldRecheck checks the held events a few times per recheck delay.
func (h *Handler) runHeldRecheck(ctx context.Context) {
	t := h.clock.NewTicker(max(h.cfg.OwnPurgatoryRecheck/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			h.recheckHeld(ctx)
		}
	}
}
