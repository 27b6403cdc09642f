package repoindex

import (
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// PendingBatch is a set of items whose historic sync is in flight on one
// relay. Each batch confirms on its own when its historic job ends.
type PendingBatch struct {
	ID    uint64
	Items Items
	// Catchup batches re-fetch confirmed items with since; they confirm
	// nothing new but keep the relay in Syncing until done.
	Catchup bool
	// Retry, when set, is the failed job this batch runs again; the relay
	// stays in ConnectedHistoricSyncFailures (not Syncing) meanwhile.
	Retry *RetryJob
	// NRepos and NRoots are how many items it had when the engine
	// registered it: what the relay's pending totals count of it.
	NRepos, NRoots int
}

// RetryJob is a historic job that failed, waiting for its next attempt.
// Its items are confirmed (their live subscriptions are open, or deferred
// until the consolidation: deferLive); only their history is missing.
type RetryJob struct {
	Items   Items
	Filters []nostr.Filter
	// Pager: the batch ran with the REQ pager even with NIP-77 on.
	Pager    bool
	Failures int
	At       time.Time // when it is due again
}

// RelayStatus is a relay's connection state as the sync engine sees it.
type RelayStatus int

// Connection states; the numbers are the values of ngit_sync_relay_connected.
const (
	Disconnected RelayStatus = iota
	Connecting
	Syncing
	Connected
	ConnectedHistoricSyncFailures
)

func (s RelayStatus) String() string {
	switch s {
	case Disconnected:
		return "disconnected"
	case Connecting:
		return "connecting"
	case Syncing:
		return "syncing"
	case Connected:
		return "connected"
	case ConnectedHistoricSyncFailures:
		return "connected_historic_sync_failures"
	}
	return "unknown"
}

// IsUp tells whether the relay has a live connection.
func (s RelayStatus) IsUp() bool { return s >= Syncing }

// RelayState is the confirmed state of one relay plus its connection
// lifecycle (one entry of the relay side of the index).
type RelayState struct {
	URL            string
	Confirmed      Items
	Bootstrap      bool
	Status         RelayStatus
	LastConnected  time.Time
	DisconnectedAt time.Time
	// HistoricFailed is set while a failed historic batch waits for a
	// successful retry (a quick reconnect keeps it; a fresh sync clears it).
	HistoricFailed bool
	// HistoricDone is set once the relay's first historic sync (since its
	// last fresh sync) completed: later batches for new items do not turn
	// it back to Syncing.
	HistoricDone bool
	// ConfirmedGen counts changes of Confirmed (bumped by whoever changes
	// it), so the state store's copy is rebuilt only then.
	ConfirmedGen uint64
}

// ClearConfirmed forgets what was confirmed (fresh sync).
func (r *RelayState) ClearConfirmed() { r.Confirmed = NewItems(); r.ConfirmedGen++ }

// AddFilters is one decision of ComputeActions: start syncing these new
// items from this relay.
type AddFilters struct {
	Relay string
	Items Items
}

// RelayActions is ComputeActions(DeriveRelayTarget(...)) for one relay
// without building the target: the relay's copy of every root its
// repositories name (an insert per root, tens of thousands, on every
// recomputation) is what that cost. Items are looked up in what is
// confirmed first (most of them, once a relay's history is read), then in
// what is pending; the result is empty when nothing is new.
func RelayActions(repos RepoSyncIndex, url string, bootstrap bool, pending []*PendingBatch, st *RelayState) Items {
	add := NewItems()
	if st == nil || !st.Status.IsUp() {
		return add
	}
	repoChecks, rootChecks := 0, 0
	if len(pending) >= 2 { // fewer are asked directly: no need to count
		for _, needs := range repos {
			if bootstrap || needs.Relays.Has(url) {
				repoChecks++
				rootChecks += needs.Roots.Len()
			}
		}
	}
	inRepos := NewPendingLookup(pending, true, repoChecks)
	inRoots := NewPendingLookup(pending, false, rootChecks)
	for ref, needs := range repos {
		if !bootstrap && !needs.Relays.Has(url) {
			continue
		}
		if !st.Confirmed.Repos.Has(ref) && !inRepos.HasName(ref) {
			add.Repos.Add(ref)
		}
		for h := range needs.Roots.Handles() { // handles: no lookup of the string per check
			if !st.Confirmed.Roots.HasH(h) && !add.Roots.HasH(h) && !inRoots.Has(h) {
				add.Roots.AddH(h)
			}
		}
	}
	return add
}

// ComputeActions is the three-way diff target − pending − confirmed, per
// relay, skipping relays that are not up. It is the only place that decides
// new Layer 2/3 subscriptions. The result is sorted by relay URL.
func ComputeActions(targets map[string]Target, pending map[string][]*PendingBatch, relays map[string]*RelayState) []AddFilters {
	var out []AddFilters
	for url, target := range targets {
		st := relays[url]
		if st == nil || !st.Status.IsUp() {
			continue
		}
		add := NewItems()
		inRepos := NewPendingLookup(pending[url], true, target.Repos.Len())
		for h := range target.Repos.Handles() {
			if !st.Confirmed.Repos.HasH(h) && !inRepos.Has(h) {
				add.Repos.AddH(h)
			}
		}
		inRoots := NewPendingLookup(pending[url], false, target.Roots.Len())
		for h := range target.Roots.Handles() {
			if !st.Confirmed.Roots.HasH(h) && !inRoots.Has(h) {
				add.Roots.AddH(h)
			}
		}
		if !add.Empty() {
			out = append(out, AddFilters{Relay: url, Items: add})
		}
	}
	slices.SortFunc(out, func(a, b AddFilters) int {
		if a.Relay < b.Relay {
			return -1
		}
		if a.Relay > b.Relay {
			return 1
		}
		return 0
	})
	return out
}

// PendingHasH tells whether one of batches holds handle h among its
// repositories (repo) or roots.
func PendingHasH(batches []*PendingBatch, h uint32, repo bool) bool {
	for _, b := range batches {
		if repo && b.Items.Repos.HasH(h) || !repo && b.Items.Roots.HasH(h) {
			return true
		}
	}
	return false
}

// PendingLookup is PendingHasH for many handles against one relay's
// pending batches. A relay waiting for its subscription budget can have
// thousands of batches, and asking each of them for every handle of a
// target cost more than the rest of ComputeActions (a visible share of
// the sidecar's CPU at scale): when the checks times the batches outnumber
// the batches' items, their union is built once instead.
type PendingLookup struct {
	batches []*PendingBatch
	repo    bool
	union   Set // nil: ask the batches
}

// NewPendingLookup prepares about checks lookups of repositories (repo) or
// roots in batches.
func NewPendingLookup(batches []*PendingBatch, repo bool, checks int) PendingLookup {
	l := PendingLookup{batches: batches, repo: repo}
	if len(batches) < 2 || checks == 0 {
		return l
	}
	items := func(b *PendingBatch) Set {
		if repo {
			return b.Items.Repos
		}
		return b.Items.Roots
	}
	total := 0
	for _, b := range batches {
		total += items(b).Len()
	}
	if checks*len(batches) <= total {
		return l
	}
	l.union = NewSet()
	for _, b := range batches {
		for h := range items(b).Handles() {
			l.union.AddH(h)
		}
	}
	return l
}

// HasName is has of a string (one that was never interned is in no set).
func (l PendingLookup) HasName(v string) bool {
	h, ok := Lookup(v)
	return ok && l.Has(h)
}

func (l PendingLookup) Has(h uint32) bool {
	if l.union != nil {
		return l.union.HasH(h)
	}
	return PendingHasH(l.batches, h, l.repo)
}
