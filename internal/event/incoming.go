package event

import "github.com/nbd-wtf/go-nostr"

// Incoming is one event as received from a relay: the decoded event, its
// decoded id, the bytes it arrived in and the relay and subscription it
// came on. A relay's read loop decodes the id, once (WithDecodedID, or
// WithID); ingest and the stages after it take the id from it.
type Incoming struct {
	Event *nostr.Event
	// Size of the frame it came in (0 if unknown).
	Size int
	// Relay is the URL of the relay it came from ("" if unknown).
	Relay string
	// Sub is the id of the subscription it came on ("" if unknown).
	Sub string
	// Raw is the event's JSON object as it arrived, byte for byte,
	// forwarded to the own relay as is when the publisher takes it; nil:
	// Event is encoded.
	Raw []byte

	id    ID
	state idState
}

type idState uint8

const (
	idUnknown idState = iota // not decoded yet
	idValid
	idInvalid // Event's id is not 64 lower-case hex characters
)

// WithID returns in with its event's id decoded, unless that was done
// already: the stages in receives keep the id from then on. Event must
// not be replaced afterwards.
func (in Incoming) WithID() Incoming {
	if in.state != idUnknown || in.Event == nil {
		return in
	}
	if id, ok := DecodeID(in.Event.ID); ok {
		in.id, in.state = id, idValid
	} else {
		in.state = idInvalid
	}
	return in
}

// WithDecodedID returns in recording id as its event's id, as DecodeID
// of the event's hex id gave it (ok false: not valid), to a caller that
// decoded it already (a relay's read loop): in's stages do not decode it
// again. id must be the event's.
func (in Incoming) WithDecodedID(id ID, ok bool) Incoming {
	if ok {
		in.id, in.state = id, idValid
	} else {
		in.id, in.state = ID{}, idInvalid
	}
	return in
}

// ID returns the event's id, decoded by WithID or, when nobody called it,
// now; false when the event has none of 64 lower-case hex characters.
func (in *Incoming) ID() (ID, bool) {
	switch in.state {
	case idValid:
		return in.id, true
	case idInvalid:
		return ID{}, false
	}
	if in.Event == nil {
		return ID{}, false
	}
	return DecodeID(in.Event.ID)
}
