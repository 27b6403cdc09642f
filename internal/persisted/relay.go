package persisted

import (
	"encoding/json"
	"time"
)

// Relay is one remote relay's sync state as a state store keeps it across
// restarts, so a restart resumes the relay as a dropped connection would:
// a quick reconnect (catch-up with since over what was confirmed) inside
// the quick-reconnect window, a fresh sync outside it.
type Relay struct {
	URL string `json:"url"`
	// Repos and Roots were confirmed (historic sync complete). A store
	// only keeps them from a moment everything received was published or
	// held (Confirmable), so they never claim events the own relay lacks.
	Repos         []string  `json:"repos,omitempty"`
	Roots         []string  `json:"roots,omitempty"`
	LastConnected time.Time `json:"last_connected,omitzero"`
	// DisconnectedAt is zero while the relay was connected; SeenUp is then
	// the last time it was known up (the save), standing in for the
	// disconnection a crash did not record.
	DisconnectedAt time.Time `json:"disconnected_at,omitzero"`
	SeenUp         time.Time `json:"seen_up,omitzero"`
	// Negentropy is "supported", "unsupported" or "" (unknown), as of
	// NegentropyAt.
	Negentropy   string    `json:"negentropy,omitempty"`
	NegentropyAt time.Time `json:"negentropy_at,omitzero"`
	// HistoricDone: the relay's historic sync had completed with no failed
	// batch waiting for a retry; without it a restart syncs it afresh.
	HistoricDone bool `json:"historic_done,omitempty"`
	// ConfirmedGen changes whenever Repos or Roots change, so a store
	// rewrites them only then.
	ConfirmedGen uint64 `json:"-"`
}

// Repos is the repository index as a state store keeps it: the root events
// of each repository (and the orphans waiting for their announcement), and
// how far the own relay's history was read. A restart pages the own
// relay's announcements and states in full (few, and the purgatory needs
// them) and its root events only since SelfSeen − since_buffer; the
// restored roots wait as orphans for their announcement, as roots paged
// before their announcement do.
type Repos struct {
	Roots    map[string][]string `json:"roots"`
	SelfSeen time.Time           `json:"self_seen,omitzero"`
	// Gen changes whenever Roots changes, so a store rewrites it only then.
	Gen uint64 `json:"-"`
	// Heads are the current announcements and states as their JSON
	// (the sync engine's KeepHeads; shared with the engine, read-only);
	// HeadsGen changes whenever they change. With them a restart pages
	// announcements and states only since SelfSeen − since_buffer too, and
	// applies the heads the catch-up finds still on the own relay.
	Heads    []Head `json:"heads,omitempty"`
	HeadsGen uint64 `json:"-"`
}

// Head is an announcement or state as it is kept and persisted: its id
// and its JSON, marshalled once when it was applied. The engine holds no
// decoded body for it (tags as [][]string and the rest): it is decoded
// only when a restart applies it.
type Head struct {
	ID   string
	JSON json.RawMessage
}
