// Package strfrypolicy is strfry's write-policy plugin: it tells strfry to
// accept what a GRASP-01 relay accepts, by the rules the sidecar syncs by.
package strfrypolicy

import (
	"maps"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// Actions of an answer (strfry's plugin protocol).
const (
	ActionAccept = "accept"
	ActionReject = "reject"
)

// Reasons of the rejections: NIP-01 prefixed, sent to the client in the OK.
const (
	ReasonNotListed    = "blocked: repository announcement must list this service in its clone and relays tags"
	ReasonNoIdentifier = "invalid: repository announcement or state without a d tag"
	ReasonStateForeign = "blocked: repository state of a repository not hosted here"
	ReasonUnrelated    = "blocked: not about a repository hosted here"
	ReasonLoading      = "error: the relay's repositories are still being read; try again shortly"
)

// Rules decides which events a GRASP-01 relay accepts, and remembers the
// repositories and root events it accepted. Its rules are the sidecar's:
//
//   - an announcement (30617) is accepted when nip34.Hosted holds (it lists
//     the service domain in `clone` and in `relays`; every announcement with
//     host all), as discovery and the purgatory decide what is hosted;
//   - a state (30618) when nip34.StateAuthorised holds for the accepted
//     announcements of its identifier (its author is the owner of one, or
//     in its recursive maintainer set), as the purgatory holds states;
//   - any other event when nip34.RefersTo holds: it tags an accepted
//     repository (`a`, `A`, `q`) or an accepted root event (`e`, `E`, `q`),
//     the sidecar's layers 2 and 3. A root event (nip34.RootRefs: a root
//     patch, a PR, a PR update, an issue) accepted so becomes a root itself,
//     as discovery adds it to its repositories.
//
// Everything else is rejected with a NIP-01 reason, among it events that
// arrive before their announcement or root: the sidecar publishes
// announcements first and publishes a rejected event again once what it
// references is accepted. Safe for concurrent use.
type Rules struct {
	domain string
	all    bool

	mu sync.Mutex
	// anns are the accepted announcements: identifier → owner → the
	// newest one's created_at and whom it lists as maintainers.
	anns  map[string]map[string]announcement
	repos map[string]struct{} // 30617:<owner>:<d> of accepted announcements
	roots map[string]struct{} // ids of accepted root events
}

// NewRules returns rules for the service at domain (HOST[:PORT]); all
// accepts every announcement (sync.host_all).
func NewRules(domain string, all bool) *Rules {
	return &Rules{domain: domain, all: all,
		anns: map[string]map[string]announcement{}, repos: map[string]struct{}{}, roots: map[string]struct{}{}}
}

// NeedsState reports whether deciding about ev needs the accepted
// repositories (everything but an announcement).
func NeedsState(ev *nostr.Event) bool { return ev.Kind != nip34.KindRepoAnnouncement }

// Decide says whether ev is accepted, with the reason when it is not, and
// remembers what an accepted event makes hosted.
func (r *Rules) Decide(ev *nostr.Event) (accept bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	accept, reason = r.decideLocked(ev)
	if accept {
		r.rememberLocked(ev)
	}
	return accept, reason
}

// Remember records ev as held by the relay when the rules accept it (the
// relay's stored events at start); it reports whether they do.
func (r *Rules) Remember(ev *nostr.Event) bool {
	accept, _ := r.Decide(ev)
	return accept
}

func (r *Rules) decideLocked(ev *nostr.Event) (bool, string) {
	switch ev.Kind {
	case nip34.KindRepoAnnouncement:
		if ev.Tags.GetD() == "" {
			return false, ReasonNoIdentifier
		}
		if !nip34.Hosted(ev, r.domain, r.all) {
			return false, ReasonNotListed
		}
		return true, ""
	case nip34.KindRepoState:
		d := ev.Tags.GetD()
		if d == "" {
			return false, ReasonNoIdentifier
		}
		byOwner := r.anns[d]
		if !nip34.StateAuthorised(ev.PubKey, maps.Keys(byOwner), listed(byOwner)) {
			return false, ReasonStateForeign
		}
		return true, ""
	}
	if nip34.RefersTo(ev, r.hasRepo, r.hasRoot) {
		return true, ""
	}
	return false, ReasonUnrelated
}

// rememberLocked records an accepted announcement or root event.
func (r *Rules) rememberLocked(ev *nostr.Event) {
	if ev.Kind == nip34.KindRepoAnnouncement {
		d := ev.Tags.GetD()
		byOwner := r.anns[d]
		if byOwner == nil {
			byOwner = map[string]announcement{}
			r.anns[d] = byOwner
		}
		if old, ok := byOwner[ev.PubKey]; !ok || ev.CreatedAt >= old.createdAt {
			byOwner[ev.PubKey] = announcement{createdAt: ev.CreatedAt, maintainers: nip34.Maintainers(ev)}
		}
		r.repos[nip34.RepoRef(ev.PubKey, d)] = struct{}{}
		return
	}
	refs, ok := nip34.RootRefs(ev)
	if !ok {
		return
	}
	for _, ref := range refs {
		if r.hasRepo(ref) {
			r.roots[ev.ID] = struct{}{}
			return
		}
	}
}

func (r *Rules) hasRepo(ref string) bool { _, ok := r.repos[ref]; return ok }
func (r *Rules) hasRoot(id string) bool  { _, ok := r.roots[id]; return ok }

// announcement is what the rules keep of an accepted announcement.
type announcement struct {
	createdAt   nostr.Timestamp
	maintainers []string
}

// listed returns whom each owner's announcement in byOwner lists.
func listed(byOwner map[string]announcement) func(string) []string {
	return func(pk string) []string { return byOwner[pk].maintainers }
}

// Counts are how many repositories and root events the rules accepted.
func (r *Rules) Counts() (repos, roots int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.repos), len(r.roots)
}
