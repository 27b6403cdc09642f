package reposync

import (
	"reflect"
	"time"
	"unsafe"
)

// PersistedRelay is one remote relay's sync state as a state store keeps
// it across restarts, so a restart resumes the relay as a dropped
// connection would: a quick reconnect (catch-up with since over what was
// confirmed) inside the quick-reconnect window, a fresh sync outside it.
type PersistedRelay struct {
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
	// ConfirmedGen changes whenever Repos or Roots change, so a store
	// rewrites them only then.
	ConfirmedGen uint64 `json:"-"`
}

// RelayStates returns every tracked remote relay's persistable state, as
// of the last status refresh (the engine's tick); nil before the first.
func (e *Engine) RelayStates() []PersistedRelay {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return e.relaySnap
}

// RestoreRelays hands the engine the relay states of the previous run;
// call it before Run. A relay's state is applied when the relay is
// tracked again (bootstrap relays at start, others when an announcement
// names them), so its next connection resumes rather than starts over.
func (e *Engine) RestoreRelays(rs []PersistedRelay) {
	e.restored = make(map[string]PersistedRelay, len(rs))
	for _, r := range rs {
		e.restored[r.URL] = r
		if e.neg != nil && r.Negentropy != "" && !r.NegentropyAt.IsZero() {
			e.neg.restoreSupport(r.URL, r.Negentropy == "supported", r.NegentropyAt)
		}
	}
}

// applyRestored gives a newly tracked relay its persisted state.
func (e *Engine) applyRestored(r *remote) {
	p, ok := e.restored[r.URL]
	if !ok {
		return
	}
	delete(e.restored, r.URL)
	for _, v := range p.Repos {
		r.Confirmed.Repos.add(v)
	}
	for _, v := range p.Roots {
		r.Confirmed.Roots.add(v)
	}
	r.LastConnected = p.LastConnected
	r.DisconnectedAt = p.DisconnectedAt
	if r.DisconnectedAt.IsZero() {
		r.DisconnectedAt = p.SeenUp
	}
	if r.DisconnectedAt.IsZero() {
		r.LastConnected = time.Time{} // nothing to measure the downtime by: fresh
	}
	// Its confirmed items were synced: a reconnect inside the window
	// catches up instead of starting over.
	r.HistoricDone = !r.LastConnected.IsZero()
}

// confirmedCache holds a relay's confirmed items as lists, rebuilt only
// when the sets changed: they only grow, or are replaced when cleared.
type confirmedCache struct {
	gen            uint64
	repos, roots   unsafe.Pointer
	nRepos, nRoots int
	repoList       []string
	rootList       []string
}

func (c *confirmedCache) lists(it Items, gen *uint64) ([]string, []string) {
	rp, op := reflect.ValueOf(it.Repos).UnsafePointer(), reflect.ValueOf(it.Roots).UnsafePointer()
	changed := c.gen == 0
	if rp != c.repos || len(it.Repos) != c.nRepos {
		c.repos, c.nRepos, c.repoList = rp, len(it.Repos), keys(it.Repos)
		changed = true
	}
	if op != c.roots || len(it.Roots) != c.nRoots {
		c.roots, c.nRoots, c.rootList = op, len(it.Roots), keys(it.Roots)
		changed = true
	}
	if changed {
		*gen++
		c.gen = *gen
	}
	return c.repoList, c.rootList
}

func keys(s set) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	return out
}

// snapshotRelays builds the persistable relay states; it runs on the Run
// goroutine with the status refresh.
func (e *Engine) snapshotRelays() []PersistedRelay {
	now := e.clock.Now()
	out := make([]PersistedRelay, 0, len(e.relays))
	if e.confirmedLists == nil {
		e.confirmedLists = map[string]*confirmedCache{}
	}
	for url := range e.confirmedLists {
		if e.relays[url] == nil {
			delete(e.confirmedLists, url)
		}
	}
	for _, r := range e.relays {
		c := e.confirmedLists[r.URL]
		if c == nil {
			c = &confirmedCache{}
			e.confirmedLists[r.URL] = c
		}
		repos, roots := c.lists(r.Confirmed, &e.confirmedGen)
		p := PersistedRelay{URL: r.URL, LastConnected: r.LastConnected, DisconnectedAt: r.DisconnectedAt,
			Repos: repos, Roots: roots, ConfirmedGen: c.gen}
		if r.Status.IsUp() {
			p.DisconnectedAt, p.SeenUp = time.Time{}, now
		}
		if e.neg != nil {
			p.Negentropy, p.NegentropyAt = e.neg.supportOf(r.URL)
		}
		out = append(out, p)
	}
	return out
}

// restoreSupport records a relay's NIP-77 support learnt in a previous run.
func (s *NegSyncer) restoreSupport(url string, ok bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.support[url] = supportEntry{supported: ok, at: at}
}

// supportOf returns what is known of a relay's NIP-77 support and since
// when ("" when nothing).
func (s *NegSyncer) supportOf(url string) (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.support[url]
	if !ok {
		return "", time.Time{}
	}
	if e.supported {
		return "supported", e.at
	}
	return "unsupported", e.at
}
