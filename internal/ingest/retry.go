package ingest

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// dependencyAccepted retries the rejected events that referenced ev.
func (h *Handler) dependencyAccepted(ev *nostr.Event) {
	refs := []string{ev.ID}
	if ev.Kind == nip34.KindRepoAnnouncement {
		if d := ev.Tags.GetD(); d != "" {
			refs = append(refs, nip34.RepoRef(ev.PubKey, d), nip34.AnyOwnerRef(d))
		}
	}
	for _, ref := range refs {
		retry, forgotten := h.rejected.dependencyAccepted(ref)
		for _, id := range forgotten {
			h.seen.Forget(id)
		}
		for _, r := range retry {
			h.retry(r.id, r.ev)
		}
	}
}

// retry queues a previously rejected event for another publish. It never
// blocks (Settle runs on the publisher's goroutine); when the retry queue is
// full the event is forgotten instead, so the next sync fetches it again,
// and retry returns false. A queued retry counts in Pending until it is
// routed: it is neither on the own relay nor in the RejectedIndex then.
// id is ev's decoded id.
func (h *Handler) retry(id event.ID, ev *nostr.Event) bool {
	h.pending.Add(1)
	select {
	case h.retries <- idEvent{id: id, ev: ev}:
		return true
	default:
		h.pending.Add(-1)
		h.seen.Forget(id)
		return false
	}
}
