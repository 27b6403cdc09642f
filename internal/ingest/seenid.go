package ingest

// States of an event id for a fetch deciding whether to ask for it
// (IDState).
const (
	// IDUnseen: not handed on and not known on the own relay.
	IDUnseen = iota
	// IDInFlight: a copy the sidecar did not check is on its way to the
	// own relay. It may be forged: if the own relay refuses it as
	// invalid the id becomes unseen again, and a different copy that
	// arrives meanwhile is checked and sent instead (flight.go).
	IDInFlight
	// IDSettled: handed on (a checked copy, or its outcome is known) or
	// known on the own relay.
	IDSettled
)

// IDState tells where an event id is: IDUnseen, IDInFlight or IDSettled.
func (h *Handler) IDState(id [32]byte) int {
	h.flying.mu.Lock()
	defer h.flying.mu.Unlock()
	if !h.seen.Has(id) {
		return IDUnseen
	}
	if fl := h.flying.m[id]; fl != nil && !fl.verified && fl.alt == nil {
		return IDInFlight
	}
	return IDSettled
}
