package purgatory

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/nbd-wtf/go-nostr"
)

// entry is one held event.
type entry struct {
	ev *nostr.Event
	// id is ev's id decoded, once, when it was taken in; idOK is false
	// when it is not lower-case hex (such an entry is left out of
	// negentropy's local set).
	id         event.ID
	idOK       bool
	identifier string
	onOwnRelay bool
	added      time.Time

	oids []string // objects the event names (state: ref targets; PR: c)
	// state
	refs []gitx.RefUpdate
	head string // branch name HEAD points at, or ""
	// PR / PR update
	owners    []string // owner pubkeys from the a tags with this identifier
	cloneURLs []string
	// addrs are every repository the a tags name, in tag order; Add
	// holds the PR under the first one that is hosted.
	addrs []repoAddr
}

// repoAddr is one repository an `a` tag names.
type repoAddr struct{ owner, d string }

type announcement struct {
	// hosted: the announcement lists the service (GRASP-01), or
	// Config.HostAll is set.
	hosted      bool
	pubkey      string
	createdAt   nostr.Timestamp
	id          string
	clone       []string
	maintainers []string
}

type stamp struct {
	createdAt nostr.Timestamp
	id        string
}

// newer reports whether a wins over b as addressable events do: later
// created_at, then lower id.
func (a stamp) newer(b stamp) bool {
	if a.createdAt != b.createdAt {
		return a.createdAt > b.createdAt
	}
	return a.id < b.id
}

// parseEntry validates ev and extracts what release needs.
func parseEntry(ev *nostr.Event, maxURLs int) (*entry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidEvent, ev.ID, fmt.Sprintf(format, args...))
	}
	if !gitx.ValidPubKey(ev.PubKey) || len(ev.ID) != 64 {
		return nil, bad("bad id or pubkey")
	}
	e := &entry{ev: ev}
	e.id, e.idOK = event.IDOf(ev)
	switch ev.Kind {
	case KindState:
		e.identifier = ev.Tags.GetD()
		if err := gitx.ValidateIdentifier(e.identifier); err != nil {
			return nil, bad("d tag: %v", err)
		}
		seen := map[string]bool{}
		for _, tag := range ev.Tags {
			if len(tag) < 2 {
				continue
			}
			name := tag[0]
			switch {
			case name == "HEAD":
				branch, ok := strings.CutPrefix(tag[1], "ref: refs/heads/")
				if !ok || gitx.ValidateRefName("refs/heads/"+branch) != nil {
					return nil, bad("HEAD %q", tag[1])
				}
				e.head = branch
			case strings.HasPrefix(name, "refs/heads/") || strings.HasPrefix(name, "refs/tags/"):
				if strings.HasSuffix(name, "^{}") {
					continue // peeled entries are ignored
				}
				if strings.HasPrefix(name, "refs/nostr/") || gitx.ValidateRefName(name) != nil || !gitx.ValidOID(tag[1]) {
					return nil, bad("ref %q -> %q", name, tag[1])
				}
				if seen[name] {
					continue
				}
				seen[name] = true
				e.refs = append(e.refs, gitx.RefUpdate{Ref: name, OID: tag[1]})
				e.oids = append(e.oids, tag[1])
			}
		}
	case KindPR, KindPRUpdate:
		c := ev.Tags.Find("c")
		if c == nil || !gitx.ValidOID(c[1]) {
			return nil, bad("c tag")
		}
		e.oids = []string{c[1]}
		for _, tag := range ev.Tags {
			if len(tag) < 2 {
				continue
			}
			switch tag[0] {
			case "a":
				kind, rest, ok := strings.Cut(tag[1], ":")
				if !ok || kind != "30617" {
					continue
				}
				owner, d, ok := strings.Cut(rest, ":")
				if !ok || !gitx.ValidPubKey(owner) || gitx.ValidateIdentifier(d) != nil {
					continue
				}
				e.addrs = append(e.addrs, repoAddr{owner, d})
			case "clone":
				e.cloneURLs = append(e.cloneURLs, tag[1:]...)
			}
		}
		if len(e.addrs) == 0 {
			return nil, bad("no repository a tag")
		}
		e.pick(e.addrs[0].d)
		if len(e.cloneURLs) > maxURLs {
			e.cloneURLs = e.cloneURLs[:maxURLs]
		}
	default:
		return nil, fmt.Errorf("%w: kind %d", ErrNotHeld, ev.Kind)
	}
	sort.Strings(e.oids)
	e.oids = dedupe(e.oids)
	return e, nil
}

// pick makes d the identifier a PR is held under: its owners are those of
// the a tags naming d.
func (e *entry) pick(d string) {
	e.identifier, e.owners = d, nil
	for _, a := range e.addrs {
		if a.d == d && !slices.Contains(e.owners, a.owner) {
			e.owners = append(e.owners, a.owner)
		}
	}
}

// hostedLocked tells whether e belongs to a hosted repository, and for a
// PR makes the first hosted repository among its a tags its identifier. A
// state is hosted when a hosted announcement of its identifier lets its
// author push (owner or maintainer); a PR when any repository it tags has a
// hosted announcement.
func (p *Purgatory) hostedLocked(e *entry) bool {
	if e.ev.Kind == KindState {
		anns := p.anns[e.identifier]
		hosted := func(yield func(string) bool) {
			for owner, a := range anns {
				if a.hosted && !yield(owner) {
					return
				}
			}
		}
		return nip34.StateAuthorised(e.ev.PubKey, hosted, listedIn(anns))
	}
	for _, a := range e.addrs {
		if ann := p.anns[a.d][a.owner]; ann != nil && ann.hosted {
			e.pick(a.d)
			return true
		}
	}
	return false
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func (p *Purgatory) insertLocked(e *entry) {
	p.gen.Add(1)
	p.byID[e.ev.ID] = e
	if e.ev.Kind == KindState {
		m := p.states[e.identifier]
		if m == nil {
			m = map[string]*entry{}
			p.states[e.identifier] = m
		}
		m[e.ev.PubKey] = e
	} else {
		m := p.prs[e.identifier]
		if m == nil {
			m = map[string]*entry{}
			p.prs[e.identifier] = m
		}
		m[e.ev.ID] = e
	}
	p.m.events.WithLabelValues(kindLabel(e.ev.Kind)).Inc()
}

// removeLocked drops e if it is still held; it reports whether it was.
func (p *Purgatory) removeLocked(e *entry) bool {
	if p.byID[e.ev.ID] != e {
		return false
	}
	delete(p.byID, e.ev.ID)
	p.gen.Add(1)
	if e.ev.Kind == KindState {
		if m := p.states[e.identifier]; m != nil && m[e.ev.PubKey] == e {
			delete(m, e.ev.PubKey)
			if len(m) == 0 {
				delete(p.states, e.identifier)
			}
		}
	} else if m := p.prs[e.identifier]; m != nil {
		delete(m, e.ev.ID)
		if len(m) == 0 {
			delete(p.prs, e.identifier)
		}
	}
	p.m.events.WithLabelValues(kindLabel(e.ev.Kind)).Dec()
	if !p.pendingLocked(e.identifier) {
		p.queue.remove(e.identifier)
		p.m.queueSize.Set(float64(p.queue.len()))
	}
	return true
}

// setLatestLocked records the newest known state of an author for an
// identifier. The map is bounded by MaxAnnouncements: when full, an
// arbitrary older record is forgotten.
func (p *Purgatory) setLatestLocked(key string, st stamp) {
	if l, ok := p.latest[key]; ok && !st.newer(l) {
		return
	}
	if _, ok := p.latest[key]; !ok && len(p.latest) >= p.cfg.MaxAnnouncements {
		for k := range p.latest {
			delete(p.latest, k)
			break
		}
	}
	p.latest[key] = st
}

func (p *Purgatory) pendingLocked(id string) bool {
	return len(p.states[id])+len(p.prs[id]) > 0
}

// screen runs ev's clone URLs through Options.CheckCloneURL (at most 20).
func (p *Purgatory) screen(ev *nostr.Event) {
	if p.check == nil || ev == nil {
		return
	}
	n := 0
	for _, tag := range ev.Tags {
		if len(tag) < 2 || tag[0] != "clone" {
			continue
		}
		for _, u := range tag[1:] {
			if n++; n > 20 {
				return
			}
			if cu, err := gitx.ParseCloneURL(u); err == nil && p.own != "" && cu.Domain == p.own {
				continue
			}
			if nip34.IsNostrURL(u) {
				continue // resolved to other clone URLs when needed, never dialled
			}
			_ = p.check(u)
		}
	}
}
