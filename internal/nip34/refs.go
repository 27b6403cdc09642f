// Package nip34 knows the shapes of NIP-34 events: their kinds, the
// addresses and references between them, and the three layers of REQ
// filters the sidecar asks remote relays with.
package nip34

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nbd-wtf/go-nostr"
)

// AnyOwnerRef stands for "an announcement of identifier d by anyone".
func AnyOwnerRef(d string) string {
	return fmt.Sprintf("%d:*:%s", KindRepoAnnouncement, d)
}

// RepoRef is the address of a repository announcement.
func RepoRef(pubkey, d string) string {
	return fmt.Sprintf("%d:%s:%s", KindRepoAnnouncement, pubkey, d)
}

// repoRefPrefix starts every repository reference.
var repoRefPrefix = strconv.Itoa(KindRepoAnnouncement) + ":"

// RootRefs returns the repositories a root event (1617, 1618, 1619, 1621)
// belongs to through its `a` tags; ok is false for events that are not
// roots (a patch replying to another patch is not a root).
func RootRefs(ev *nostr.Event) (refs []string, ok bool) {
	switch ev.Kind {
	case KindPatch:
		if !isRootPatch(ev) {
			return nil, false
		}
	case KindPullRequest, KindPRUpdate, KindIssue:
	default:
		return nil, false
	}
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "a" && strings.HasPrefix(tag[1], repoRefPrefix) && strings.Count(tag[1], ":") == 2 {
			refs = append(refs, tag[1])
		}
	}
	return refs, len(refs) > 0
}

// isRootPatch: a patch marked t=root/root-revision, or one that replies to
// nothing.
func isRootPatch(ev *nostr.Event) bool {
	hasE := false
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		if tag[0] == "t" && (tag[1] == "root" || tag[1] == "root-revision") {
			return true
		}
		if tag[0] == "e" {
			hasE = true
		}
	}
	return !hasE
}

// References lists what an event depends on: repository addresses (a, A,
// q with an address) and event ids (e, E, q with an id). A GRASP relay
// accepts an event only once one of these is accepted.
func References(ev *nostr.Event) []string {
	var out []string
	if ev.Kind == KindRepoState {
		// A state depends on an announcement with its d, by its author or
		// by an owner that lists the author as maintainer.
		out = append(out, AnyOwnerRef(ev.Tags.GetD()))
	}
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		switch tag[0] {
		case "a", "A", "e", "E", "q":
			if len(tag[1]) <= 200 {
				out = append(out, tag[1])
			}
		}
	}
	return out
}
