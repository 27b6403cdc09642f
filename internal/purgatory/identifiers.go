package purgatory

import (
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/throttle"
)

// ErrNoSource is noted for an identifier whose sync attempt found no clone
// URL to fetch from: none announced outside the own domain, or every one
// refused.
var ErrNoSource = errors.New("no clone URL to fetch from (none announced outside the own domain, or all refused)")

// IdentifierStatus is what the purgatory holds for one identifier (the
// repository's d tag) and how its git sync goes.
type IdentifierStatus struct {
	Identifier string
	// States and PRs count the held events (PRs include PR updates).
	States, PRs int
	// HeldSince is when the oldest held event arrived; it expires at
	// HeldSince + the configured expiry.
	HeldSince time.Time
	ExpiresAt time.Time
	// Attempts counts sync attempts that failed in a row: fetches that ran
	// and left data missing (or errors), never a wait for a throttled
	// domain.
	Attempts int
	// Syncing is true while a fetch or release of it runs; NextAttempt is
	// zero then, and while it waits for a domain with nothing else planned.
	Syncing     bool
	NextAttempt time.Time
	// Waiting lists the clone URL domains whose request slot the identifier
	// waits for (DomainLimit is their limit): the domain's queue starts its
	// fetch as soon as a slot frees.
	Waiting []string
	// LastError is the most recent failure of a fetch, of computing the
	// missing objects or of a release, in full; LastErrorAt when it happened.
	LastError   string
	LastErrorAt time.Time
}

// Identifiers returns every identifier with held events, oldest first (the
// next to expire), then by name.
func (p *Purgatory) Identifiers() []IdentifierStatus {
	out := p.identifiers()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].HeldSince.Equal(out[j].HeldSince) {
			return out[i].HeldSince.Before(out[j].HeldSince)
		}
		return out[i].Identifier < out[j].Identifier
	})
	return out
}

// identifiers collects Identifiers' rows under the lock, unsorted.
func (p *Purgatory) identifiers() []IdentifierStatus {
	_, waiting, running := p.th.Status() // before p.mu: the throttle locks first
	p.mu.Lock()
	defer p.mu.Unlock()
	index := make(map[string]int, len(p.states)+len(p.prs))
	out := make([]IdentifierStatus, 0, len(p.states)+len(p.prs))
	for _, e := range p.byID {
		i, ok := index[e.identifier]
		if !ok {
			i = len(out)
			index[e.identifier] = i
			out = append(out, IdentifierStatus{Identifier: e.identifier, HeldSince: e.added})
		}
		s := &out[i]
		if e.ev.Kind == KindState {
			s.States++
		} else {
			s.PRs++
		}
		if e.added.Before(s.HeldSince) {
			s.HeldSince = e.added
		}
	}
	for i := range out {
		s := &out[i]
		s.ExpiresAt = s.HeldSince.Add(p.cfg.Expiry)
		s.Waiting = waiting[s.Identifier]
		s.Syncing = running[s.Identifier]
		if q := p.queue.entries[s.Identifier]; q != nil {
			s.Attempts = q.attempts
			s.Syncing = s.Syncing || q.inProgress
			if !s.Syncing {
				s.NextAttempt = q.next
			}
			s.LastError, s.LastErrorAt = q.lastErr, q.lastErrAt
		}
	}
	return out
}

// DomainStatus is one clone URL domain's request throttle at a moment.
type DomainStatus = throttle.DomainStatus

// DomainLimit is the request limit of every clone URL domain.
type DomainLimit struct {
	// Concurrency git requests at once, Requests within any Window.
	Concurrency, Requests int
	Window                time.Duration
}

// Domains returns the clone URL domains with git requests waiting,
// running or counted in the rate window, by name.
func (p *Purgatory) Domains() []DomainStatus {
	d, _, _ := p.th.Status()
	return d
}

// DomainLimit returns the request limit every clone URL domain has.
func (p *Purgatory) DomainLimit() DomainLimit {
	return DomainLimit{Concurrency: p.cfg.DomainConcurrency, Requests: p.cfg.DomainRequestsPerWindow, Window: p.cfg.DomainWindow}
}

// noteError records err as identifier's last error (on one line), shown by
// Identifiers until the identifier leaves the sync queue.
func (p *Purgatory) noteError(id string, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.queue.entries[id]; q != nil {
		q.lastErr = strings.Join(strings.Fields(err.Error()), " ")
		q.lastErrAt = p.clock.Now()
	}
}
