package harness

import (
	"github.com/nbd-wtf/go-nostr"
)

// ReasonPurgatory is the OK true reason of RelayOptions.HoldPurgatory.
const ReasonPurgatory = "purgatory: won't be served until git data arrives"

// hold keeps ev in the relay's purgatory.
func (r *Relay) hold(ev *nostr.Event) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if r.held == nil {
		r.held = map[string]*nostr.Event{}
	}
	r.held[ev.ID] = ev
}

// Held returns the ids in the relay's purgatory (see HoldPurgatory).
func (r *Relay) Held() []string {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	ids := make([]string, 0, len(r.held))
	for id := range r.held {
		ids = append(ids, id)
	}
	return ids
}

// ReleaseHeld stores the held events (their git data arrived) without
// delivering them to live subscriptions, and returns how many.
func (r *Relay) ReleaseHeld() int {
	r.heldMu.Lock()
	evs := make([]*nostr.Event, 0, len(r.held))
	for _, ev := range r.held {
		evs = append(evs, ev)
	}
	r.held = nil
	r.heldMu.Unlock()
	return r.store.Put(evs...)
}

// DiscardHeld drops the held events (GRASP-01: after 30 minutes without
// git data) and returns how many there were.
func (r *Relay) DiscardHeld() int {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	n := len(r.held)
	r.held = nil
	return n
}
