package reposync

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/filters"
)

// ErrBadRelayURL is returned for relay URLs that cannot be used.
var ErrBadRelayURL = errors.New("unusable relay URL")

// NormalizeRelayURL returns the canonical form of a relay URL: ws or wss,
// lower-case host, no default port, no trailing slash, no query or fragment.
func NormalizeRelayURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > 512 {
		return "", fmt.Errorf("%w: empty or too long", ErrBadRelayURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadRelayURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "ws" && scheme != "wss" {
		return "", fmt.Errorf("%w: scheme %q is not ws or wss", ErrBadRelayURL, u.Scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: credentials in URL", ErrBadRelayURL)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%w: no host", ErrBadRelayURL)
	}
	if strings.Contains(host, ":") {
		if a, err := netip.ParseAddr(host); err != nil || a.Zone() != "" {
			return "", fmt.Errorf("%w: malformed or zoned IPv6 host", ErrBadRelayURL)
		}
	} else if strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		// Internationalised names arrive in punycode.
		return "", fmt.Errorf("%w: host has characters outside [a-z0-9.-_]", ErrBadRelayURL)
	}
	port := u.Port()
	if (scheme == "ws" && port == "80") || (scheme == "wss" && port == "443") {
		port = ""
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	return scheme + "://" + hostport + path, nil
}

// relayHost returns host[:port] of a normalized relay URL.
func relayHost(norm string) string {
	u, err := url.Parse(norm)
	if err != nil {
		return ""
	}
	return u.Host
}

// Announcement is what the sync engine reads from a kind 30617 event.
type Announcement struct {
	Ref       string // 30617:<pubkey>:<d>
	CreatedAt int64
	Relays    []string // normalized, deduplicated
	Dropped   int      // relay URLs refused or over the limit
}

// anyOwnerRef stands for "an announcement of identifier d by anyone".
func anyOwnerRef(d string) string {
	return fmt.Sprintf("%d:*:%s", filters.KindRepoAnnouncement, d)
}

// RepoRef is the address of a repository announcement.
func RepoRef(pubkey, d string) string {
	return fmt.Sprintf("%d:%s:%s", filters.KindRepoAnnouncement, pubkey, d)
}

// ParseAnnouncement reads the relay URLs of an announcement: the values of
// its `relays` tags plus relays derived from `clone` URLs of GRASP servers
// (https://host/<npub>/<d>.git → wss://host). own is excluded (the own
// relay and service domain), at most maxRelays are taken.
func ParseAnnouncement(ev *nostr.Event, isOwn func(string) bool, maxRelays int) (Announcement, error) {
	if ev.Kind != filters.KindRepoAnnouncement {
		return Announcement{}, fmt.Errorf("kind %d is not an announcement", ev.Kind)
	}
	d := ev.Tags.GetD()
	if d == "" {
		return Announcement{}, errors.New("announcement without d tag")
	}
	a := Announcement{Ref: RepoRef(ev.PubKey, d), CreatedAt: int64(ev.CreatedAt)}
	seen := set{}
	consider := func(raw string) {
		norm, err := NormalizeRelayURL(raw)
		if err != nil || seen.has(norm) {
			if err != nil {
				a.Dropped++
			}
			return
		}
		seen.add(norm)
		if isOwn != nil && isOwn(norm) {
			return
		}
		if maxRelays > 0 && len(a.Relays) >= maxRelays {
			a.Dropped++
			return
		}
		a.Relays = append(a.Relays, norm)
	}
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		switch tag[0] {
		case "relays":
			for _, v := range tag[1:] {
				consider(v)
			}
		case "clone":
			for _, v := range tag[1:] {
				if r, ok := graspRelayFromClone(v, d); ok {
					consider(r)
				}
			}
		}
	}
	return a, nil
}

// graspRelayFromClone derives the relay of a GRASP server from one of its
// clone URLs: http(s)://host/<npub1…>/<d>.git → ws(s)://host.
func graspRelayFromClone(clone, d string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(clone))
	if err != nil || u.Host == "" {
		return "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "npub1") || parts[1] != d+".git" {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "wss://" + u.Host, true
	case "http":
		return "ws://" + u.Host, true
	}
	return "", false
}

// RootRefs returns the repositories a root event (1617, 1618, 1619, 1621)
// belongs to through its `a` tags; ok is false for events that are not
// roots (a patch replying to another patch is not a root).
func RootRefs(ev *nostr.Event) (refs []string, ok bool) {
	switch ev.Kind {
	case filters.KindPatch:
		if !isRootPatch(ev) {
			return nil, false
		}
	case filters.KindPullRequest, filters.KindPRUpdate, filters.KindIssue:
	default:
		return nil, false
	}
	prefix := fmt.Sprintf("%d:", filters.KindRepoAnnouncement)
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "a" && strings.HasPrefix(tag[1], prefix) && strings.Count(tag[1], ":") == 2 {
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
	if ev.Kind == filters.KindRepoState {
		// A state depends on an announcement with its d, by its author or
		// by an owner that lists the author as maintainer.
		out = append(out, anyOwnerRef(ev.Tags.GetD()))
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
