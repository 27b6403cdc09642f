package ingest

// Settled tells whether an event need not be fetched again: its id was
// seen (handed on, or known on the own relay) and no copy the sidecar did
// not check is on its way to the own relay. While an unchecked copy is in
// flight another copy is still worth fetching: the first may be forged,
// and a different copy is verified and sent if it is refused (flight.go).
func (h *Handler) Settled(id [32]byte) bool {
	h.flying.mu.Lock()
	defer h.flying.mu.Unlock()
	if !h.seen.Has(id) {
		return false
	}
	fl := h.flying.m[id]
	return fl == nil || fl.verified || fl.alt != nil
}
