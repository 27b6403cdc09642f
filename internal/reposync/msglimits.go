package reposync

import (
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// defaultMaxMessage is the message size assumed for a relay that announces
// none (NIP-11 max_message_length): strfry's default, the smallest in use
// among the common relays (khatru: 512,000).
const defaultMaxMessage = 131_072

// messageLimit is the largest message url accepts, as announced or assumed.
func messageLimit(l relay.Limits) int {
	if l.MaxMessageLength > 0 {
		return l.MaxMessageLength
	}
	return defaultMaxMessage
}

// reqBytesLimit bounds the filter JSON of one REQ for a relay: maxReqBytes,
// lowered to fit its message size with room for the envelope.
func reqBytesLimit(l relay.Limits) int {
	return max(1024, min(maxReqBytes, messageLimit(l)-1024))
}

// negFrameLimit is the NIP-77 frame limit (binary bytes) for a relay and a
// filter of filterLen bytes of JSON: the configured limit, lowered so a
// NEG-OPEN (hex message plus filter) or NEG-MSG fits the relay's message
// size; never below the protocol engine's minimum of 4096.
func negFrameLimit(configured int, l relay.Limits, filterLen int) int {
	room := (messageLimit(l) - filterLen - 256) / 2
	if configured == 0 || room < configured {
		configured = room
	}
	return max(configured, 4096)
}

// idsPerReq is how many ids one fetching REQ carries: batch, lowered so the
// REQ fits the relay's message size (an id takes 67 bytes of JSON).
func idsPerReq(batch int, l relay.Limits) int {
	return max(1, min(batch, (messageLimit(l)-256)/67))
}
