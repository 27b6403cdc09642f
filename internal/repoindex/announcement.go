package repoindex

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// RelayHost returns host[:port] of a normalized relay URL.
func RelayHost(norm string) string {
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

// ParseAnnouncement reads the relay URLs of an announcement: the values of
// its `relays` tags plus relays derived from `clone` URLs of GRASP servers
// (https://host/<npub>/<d>.git → wss://host). own is excluded (the own
// relay and service domain), at most maxRelays are taken.
func ParseAnnouncement(ev *nostr.Event, isOwn func(string) bool, maxRelays int) (Announcement, error) {
	if ev.Kind != nip34.KindRepoAnnouncement {
		return Announcement{}, fmt.Errorf("kind %d is not an announcement", ev.Kind)
	}
	d := ev.Tags.GetD()
	if d == "" {
		return Announcement{}, errors.New("announcement without d tag")
	}
	a := Announcement{Ref: nip34.RepoRef(ev.PubKey, d), CreatedAt: int64(ev.CreatedAt)}
	// A plain map, not a set: a set interns its members for the process's
	// life, and an announcement may name any number of URLs it is refused.
	seen := map[string]struct{}{}
	consider := func(raw string) {
		norm, err := relay.NormalizeURL(raw)
		if _, dup := seen[norm]; err != nil || dup {
			if err != nil {
				a.Dropped++
			}
			return
		}
		seen[norm] = struct{}{}
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

func HostOnly(hostport string) string {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			return hostport[:i]
		}
		if hostport[i] == ']' {
			break
		}
	}
	return hostport
}
