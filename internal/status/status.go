// Package status defines the JSON snapshot a running sidecar serves on
// /status and that `grasp-sync status` prints.
package status

import (
	"fmt"
	"time"
)

// Snapshot is the whole status document.
type Snapshot struct {
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	Ready     bool      `json:"ready"`
	// NotReady says why the sidecar is not ready, as /readyz does; empty
	// when ready.
	NotReady string   `json:"not_ready,omitempty"`
	OwnRelay OwnRelay `json:"own_relay"`
	Relays   []Relay  `json:"relays"`
	// Repositories is the number of repositories in the RepoSyncIndex.
	Repositories int `json:"repositories"`
	// RootEvents is the number of root events (patches, PRs, issues) tracked.
	RootEvents     int       `json:"root_events"`
	PendingBatches int       `json:"pending_batches"`
	Publisher      Publisher `json:"publisher"`
	Purgatory      Purgatory `json:"purgatory"`
	Rejected       Rejected  `json:"rejected"`
	State          State     `json:"state"`
}

// State describes the persistent sync state store.
type State struct {
	// Outcome is how the store was found at start: fresh, resumed,
	// other-relay, old-format, corrupt (the last three set the old one
	// aside), or memory-only without a state directory.
	Outcome       string    `json:"outcome"`
	Dir           string    `json:"dir,omitempty"`
	Bytes         int64     `json:"bytes"`
	Events        int       `json:"events"`
	BytesPerEvent float64   `json:"bytes_per_event"`
	LastFlush     time.Time `json:"last_flush,omitzero"`
	// RelaysSaved is when the remote relays' states were last saved (only
	// at an instant nothing received is on its way to the own relay; zero
	// before the first save of this run).
	RelaysSaved time.Time `json:"relays_saved,omitzero"`
	// InUse is the bytes held per part of the store (local, relays,
	// repos, purgatory, meta), without free pages.
	InUse map[string]int64 `json:"in_use,omitempty"`
}

// OwnRelay describes the connection to the operator's relay.
type OwnRelay struct {
	URL       string `json:"url"`
	Connected bool   `json:"connected"`
	// SelfSubscriptionEOSE is true once the self-subscription's first EOSE arrived.
	SelfSubscriptionEOSE bool `json:"self_subscription_eose"`
	// TiesCut counts the seconds of its history holding more announcements
	// or roots than it returns per REQ that neither NIP-77 nor a split
	// filter read whole: events beyond them are not seen.
	TiesCut int `json:"ties_cut,omitempty"`
	// Truncation says how it was caught returning fewer events than it
	// holds, as a remote relay's.
	Truncation string `json:"truncation,omitempty"`
	// RootsAppliedLate counts the roots (patches, PRs, issues) it
	// acknowledged storing that the self-subscription did not deliver
	// within sync.root_wait (its connection dropped meanwhile, or the
	// relay does not serve them to it): applied from the acknowledgement.
	RootsAppliedLate uint64 `json:"roots_applied_late"`
	// RootsUnapplied counts such roots that cannot be applied: their
	// repository's announcement is not applied and the orphan roots'
	// bound is reached.
	RootsUnapplied int `json:"roots_unapplied"`
}

// Relay describes one remote relay the sidecar tracks.
type Relay struct {
	URL            string     `json:"url"`
	State          string     `json:"state"`
	Health         string     `json:"health"`
	Bootstrap      bool       `json:"bootstrap,omitempty"`
	Negentropy     string     `json:"negentropy,omitempty"` // "unknown", "supported", "unsupported"
	ReposConfirmed int        `json:"repos_confirmed"`
	ReposPending   int        `json:"repos_pending"`
	RootsConfirmed int        `json:"roots_confirmed"`
	RootsPending   int        `json:"roots_pending"`
	FiltersOpen    int        `json:"filters_open"`
	PendingBatches int        `json:"pending_batches"`
	EventsReceived uint64     `json:"events_received"`
	Failures       int        `json:"failures"`
	LastConnected  *time.Time `json:"last_connected,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	// Truncation says how the relay was caught returning fewer events than
	// it holds (a NIP-77 set or REQ cut at a cap); the rest is paged.
	Truncation string `json:"truncation,omitempty"`
	// TiesCut counts the seconds of the relay's history holding more
	// events than it returns per REQ that neither NIP-77 nor a split
	// filter read whole (Truncation's "tie"): the relay is not synced.
	TiesCut int `json:"ties_cut,omitempty"`
	// ReadAuth is the relay's NIP-42 state when it asked for AUTH before
	// serving reads: "authenticated", "needs a key: …" or "AUTH failed: …".
	ReadAuth string `json:"read_auth,omitempty"`
	// Refused is the refusal that will not change by itself (restricted:,
	// blocked:, auth-required: without a key) for which the relay is sent
	// no REQ or NEG-OPEN, and until when (health refusal_wait); else,
	// while the relay refuses requests for another reason, that refusal
	// and when the next request goes (health.Pacer's backoff).
	Refused string `json:"refused,omitempty"`
	// EventsNew counts the events that were new when they came from the
	// relay (ingest.Handler.Fresh): EventsReceived less those it was
	// asked for again, those had from another relay first and those the
	// own relay held already.
	EventsNew uint64 `json:"events_new"`
}

// Publisher summarises the publisher to the own relay.
type Publisher struct {
	Queued     int    `json:"queued"`
	InFlight   int    `json:"in_flight"`
	Accepted   uint64 `json:"accepted"`
	Duplicates uint64 `json:"duplicates"`
	Rejected   uint64 `json:"rejected"`
}

// Purgatory summarises events held until their git data exists.
type Purgatory struct {
	Enabled   bool `json:"enabled"`
	Events    int  `json:"events"`
	QueueSize int  `json:"queue_size"`
	// Waiting counts the identifiers waiting for a clone URL domain's
	// request slot (throttled, not failed).
	Waiting int `json:"waiting"`
	// DomainLimit is the git request limit of every clone URL domain.
	DomainLimit DomainLimit `json:"domain_limit"`
	// Domains lists the clone URL domains with git requests waiting,
	// running or counted in the rate window, by name.
	Domains []PurgatoryDomain `json:"domains,omitempty"`
	// Identifiers lists every identifier with held events, oldest first.
	Identifiers []PurgatoryIdentifier `json:"identifiers,omitempty"`
}

// DomainLimit is a clone URL domain's git request limit
// (purgatory.domain_requests_per_window, domain_window, domain_concurrency).
type DomainLimit struct {
	RequestsPerWindow int     `json:"requests_per_window"`
	WindowSeconds     float64 `json:"window_seconds"`
	Concurrency       int     `json:"concurrency"`
}

// String is the limit for a person: "30 requests per 1m0s, 5 at once".
func (l DomainLimit) String() string {
	return fmt.Sprintf("%d requests per %s, %d at once", l.RequestsPerWindow, l.window(), l.Concurrency)
}

// Rate is the rate part, short: "30 requests/1m0s".
func (l DomainLimit) Rate() string {
	return fmt.Sprintf("%d requests/%s", l.RequestsPerWindow, l.window())
}

func (l DomainLimit) window() time.Duration {
	return time.Duration(l.WindowSeconds * float64(time.Second)).Round(time.Millisecond)
}

// PurgatoryDomain is one clone URL domain's request throttle.
type PurgatoryDomain struct {
	Domain string `json:"domain"`
	// Waiting counts identifiers waiting for a request slot.
	Waiting  int `json:"waiting"`
	InFlight int `json:"in_flight"`
	// RequestsInWindow counts the requests in the rate window now.
	RequestsInWindow int `json:"requests_in_window"`
	// NextSlot is when the rate window frees a slot; unset when one frees
	// only as a running request ends.
	NextSlot *time.Time `json:"next_slot,omitempty"`
}

// PurgatoryWait is a clone URL domain an identifier waits on for a request
// slot, with the domain's limit: its fetch starts when a slot frees.
type PurgatoryWait struct {
	Domain string `json:"domain"`
	DomainLimit
}

// PurgatoryIdentifier is what the purgatory holds for one identifier (a
// repository's d tag) and how fetching its git data goes.
type PurgatoryIdentifier struct {
	Identifier string    `json:"identifier"`
	States     int       `json:"states"`
	PRs        int       `json:"prs"`
	HeldSince  time.Time `json:"held_since"`
	ExpiresAt  time.Time `json:"expires_at"`
	// Attempts counts the sync attempts that failed in a row: fetches that
	// ran and left git data missing, never a wait for a throttled domain.
	Attempts int  `json:"attempts"`
	Syncing  bool `json:"syncing,omitempty"`
	// WaitingFor lists the domains whose request slot the identifier
	// waits for; it is fetched as soon as one frees.
	WaitingFor []PurgatoryWait `json:"waiting_for,omitempty"`
	// NextAttempt is unset while an attempt runs or waits for a domain.
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// Rejected summarises the RejectedIndex.
type Rejected struct {
	Hot  int `json:"hot"`
	Cold int `json:"cold"`
}
