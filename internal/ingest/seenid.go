package ingest

// SeenID is Seen for a binary id: the event went through the handler
// (handed to the publisher or the purgatory, or waiting for its outcome)
// or is known to be on the own relay.
func (h *Handler) SeenID(id [32]byte) bool { return h.seen.Has(id) }
