package persisted

import (
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Rejected is the rejected index as a state store keeps it: the hash key,
// the cold entries (binary: id, rejected at, created_at, reference hashes)
// and the hot events with when they were rejected.
type Rejected struct {
	Key  uint64        `json:"key"`
	Cold []byte        `json:"cold"`
	Hot  []RejectedHot `json:"hot,omitempty"`
}

// RejectedHot is one hot entry of Rejected.
type RejectedHot struct {
	Event *nostr.Event `json:"event"`
	At    time.Time    `json:"at"`
}
