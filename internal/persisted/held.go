package persisted

import (
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Held is one event held in purgatory as a state store keeps it across
// restarts: the event, whether it was seen on the own relay, when it was
// taken in (the expiry counts from there, in wall-clock time, so downtime
// counts), and the attempts and next attempt of its identifier's git sync.
type Held struct {
	Event      *nostr.Event `json:"event"`
	OnOwnRelay bool         `json:"own,omitempty"`
	Added      time.Time    `json:"added"`
	Attempts   int          `json:"attempts,omitempty"`
	Next       time.Time    `json:"next"`
}
