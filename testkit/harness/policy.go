package harness

import (
	"strings"

	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/nbd-wtf/go-nostr"
)

// Policy decides whether relay r accepts an event published to it. It
// returns false with a reason carrying a NIP-01 prefix ("blocked: …",
// "restricted: …") to reject. It is only called for valid, signed events the
// relay does not hold yet, so duplicates are never rejected by a policy.
type Policy func(r *Relay, ev *nostr.Event) (accept bool, reason string)

// Rejection reasons of GraspPolicy.
const (
	ReasonAnnouncementNotListed = "blocked: repository announcement must list this service in its clone and relays tags"
	ReasonStateUnknownRepo      = "restricted: repository state for a repository this service does not host"
	ReasonUnrelated             = "restricted: event does not reference a repository or root event hosted here"
)

// GraspPolicy is a GRASP-01-like acceptance policy for the own relay:
//
//   - a 30617 announcement is accepted only if both a clone URL and a relays
//     URL name this service: the relay's own 127.0.0.1:port, or one of
//     services (host[:port][/path] prefixes, e.g. a git server's address);
//   - a 30618 state is accepted for an accepted repository: an announcement
//     with the same pubkey and d, or one with that d listing the author as a
//     maintainer;
//   - any other event is accepted only if it tags an accepted announcement
//     (a/A/q with 30617:<pubkey>:<d>) or an accepted event (e/E/q), or is
//     tagged by an accepted event (e/E/q).
//
// "Accepted" means present in the relay's store, injected events included.
func GraspPolicy(services ...string) Policy {
	return func(r *Relay, ev *nostr.Event) (bool, string) {
		svcs := append([]string{r.Addr()}, services...)
		switch ev.Kind {
		case signed.KindAnnouncement:
			if listsService(ev, "clone", svcs) && listsService(ev, "relays", svcs) {
				return true, ""
			}
			return false, ReasonAnnouncementNotListed
		case signed.KindState:
			if repoHosted(r.store, ev.PubKey, ev.Tags.GetD()) {
				return true, ""
			}
			return false, ReasonStateUnknownRepo
		}
		if referencesAccepted(r.store, ev) || referencedByAccepted(r.store, ev.ID) {
			return true, ""
		}
		return false, ReasonUnrelated
	}
}

// listsService reports whether a tag named key lists a URL of one of svcs.
func listsService(ev *nostr.Event, key string, svcs []string) bool {
	for _, tag := range ev.Tags {
		if len(tag) < 2 || tag[0] != key {
			continue
		}
		for _, u := range tag[1:] {
			if _, rest, ok := strings.Cut(u, "://"); ok {
				u = rest
			}
			for _, s := range svcs {
				if u == s || strings.HasPrefix(u, strings.TrimSuffix(s, "/")+"/") {
					return true
				}
			}
		}
	}
	return false
}

// repoHosted reports whether an accepted announcement with d is by pubkey or
// lists pubkey as a maintainer.
func repoHosted(s *Store, pubkey, d string) bool {
	for _, ann := range s.Match(nostr.Filter{Kinds: []int{signed.KindAnnouncement}, Tags: nostr.TagMap{"d": {d}}}, 0) {
		if ann.PubKey == pubkey {
			return true
		}
		for _, tag := range ann.Tags {
			if len(tag) >= 2 && tag[0] == "maintainers" {
				for _, m := range tag[1:] {
					if m == pubkey {
						return true
					}
				}
			}
		}
	}
	return false
}

func referencesAccepted(s *Store, ev *nostr.Event) bool {
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		switch tag[0] {
		case "a", "A", "q", "e", "E":
		default:
			continue
		}
		v := tag[1]
		if parts := strings.SplitN(v, ":", 3); len(parts) == 3 {
			if parts[0] == "30617" && len(s.Match(nostr.Filter{
				Kinds: []int{signed.KindAnnouncement}, Authors: []string{parts[1]}, Tags: nostr.TagMap{"d": {parts[2]}},
			}, 1)) > 0 {
				return true
			}
			continue
		}
		if tag[0] != "a" && tag[0] != "A" && s.Get(v) != nil {
			return true
		}
	}
	return false
}

func referencedByAccepted(s *Store, id string) bool {
	for _, key := range []string{"e", "E", "q"} {
		if len(s.Match(nostr.Filter{Tags: nostr.TagMap{key: {id}}}, 1)) > 0 {
			return true
		}
	}
	return false
}
