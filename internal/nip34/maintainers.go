package nip34

import (
	"iter"

	"github.com/nbd-wtf/go-nostr"
)

// Maintainers returns the pubkeys an announcement's `maintainers` tags list;
// values that are not 64 lower-case hex characters are left out.
func Maintainers(ev *nostr.Event) []string {
	var out []string
	for _, tag := range ev.Tags {
		if len(tag) < 2 || tag[0] != "maintainers" {
			continue
		}
		for _, m := range tag[1:] {
			if ValidPubKey(m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// ValidPubKey reports whether s is a pubkey as events carry it: 64
// lower-case hex characters.
func ValidPubKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// MaintainerSet is owner's recursive maintainer set among the announcements
// of one identifier: the owner, whom its announcement lists, whom their
// announcements list, and so on (cycles end it). listed returns whom
// pubkey's announcement of the identifier lists (nil without one).
func MaintainerSet(owner string, listed func(pubkey string) []string) map[string]bool {
	set := map[string]bool{owner: true}
	queue := []string{owner}
	for len(queue) > 0 {
		pk := queue[0]
		queue = queue[1:]
		for _, m := range listed(pk) {
			if !set[m] {
				set[m] = true
				queue = append(queue, m)
			}
		}
	}
	return set
}

// StateAuthorised is the hosting rule for a state (30618) of an
// identifier: it belongs to a hosted repository when the recursive
// maintainer set (MaintainerSet over listed) of one of hostedOwners, the
// owners of the identifier's hosted announcements, contains its author.
func StateAuthorised(author string, hostedOwners iter.Seq[string], listed func(pubkey string) []string) bool {
	for owner := range hostedOwners {
		if owner == author || MaintainerSet(owner, listed)[author] {
			return true
		}
	}
	return false
}
