package nip34

import (
	"net/url"
	"strings"

	"github.com/nbd-wtf/go-nostr"
)

// ListsService applies GRASP-01's announcement rule: the announcement names
// the service at domain (HOST or HOST:PORT) in a `clone` URL and in a
// `relays` URL. Hosts compare case-insensitively, a scheme's default port
// (443 for https/wss, 80 for http/ws) is ignored.
func ListsService(ev *nostr.Event, domain string) bool {
	domain = NormalizeHost("", domain)
	if domain == "" {
		return false
	}
	clone, relays := false, false
	for _, tag := range ev.Tags {
		if len(tag) < 2 || (tag[0] != "clone" && tag[0] != "relays") {
			continue
		}
		for _, raw := range tag[1:] {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.Host == "" || NormalizeHost(u.Scheme, u.Host) != domain {
				continue
			}
			if tag[0] == "clone" {
				clone = true
			} else {
				relays = true
			}
		}
	}
	return clone && relays
}

// NormalizeHost lower-cases host[:port] and drops the default port of
// scheme (443 for https and wss, 80 for http and ws, 9418 for git; both web
// ports when scheme is empty or unknown), so URLs of one service compare
// equal however they spell it.
func NormalizeHost(scheme, hostport string) string {
	h := strings.ToLower(hostport)
	var defaults []string
	switch strings.ToLower(scheme) {
	case "https", "wss":
		defaults = []string{":443"}
	case "http", "ws":
		defaults = []string{":80"}
	case "git":
		defaults = []string{":9418"}
	default:
		defaults = []string{":443", ":80"}
	}
	for _, p := range defaults {
		if s, ok := strings.CutSuffix(h, p); ok {
			return s
		}
	}
	return h
}

// Hosted is the sidecar's hosting rule for an announcement the own relay
// accepted: with all (sync.host_all) or without a service domain the own
// relay's acceptance decides; otherwise GRASP-01's rule (ListsService).
func Hosted(ann *nostr.Event, domain string, all bool) bool {
	return all || domain == "" || ListsService(ann, domain)
}
