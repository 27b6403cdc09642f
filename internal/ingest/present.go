package ingest

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// What the state store (internal/statestore) needs of the handler: whether
// everything received has left it, and the dedupe set primed from a
// restored local index.

// Pending is the number of events handed to Handle whose processing has
// not finished (queued or being validated and routed), and of events
// queued to be published again (a rejected event whose dependency was
// accepted, a held event due for a recheck) until they are routed. Zero, with the
// publisher empty, means everything received so far is published, held
// or dropped for a reason.
func (h *Handler) Pending() int { return int(h.pending.Load()) }

// ForgetPresent undoes MarkPresent for an event the own relay turned out
// to lack (removed while the sidecar was down): it may be published again.
func (h *Handler) ForgetPresent(id string) {
	if b, ok := event.DecodeID(id); ok {
		h.seen.Forget(b)
	}
}

// learnPresent records that the own relay holds ev (id is its binary id),
// stored by it just now for the first time when fresh (Present.AddNew).
// The Present table (the LocalIndex) takes it, with a dedupe mark, when
// there is one, and the dedupe set drops its own mark of the id: an id is
// kept once. Without a table, or when it refuses the event (full),
// the mark keeps it from being published again.
func (h *Handler) learnPresent(ev *nostr.Event, id event.ID, fresh bool) {
	if h.present != nil {
		// A full index counts what it drops in its own metrics.
		if err := h.present.AddID(id, ev, fresh); err == nil && h.seen.present != nil {
			h.seen.dropMark(id) // the table's entry carries the mark
			return
		}
	}
	h.seen.Mark(id)
}
