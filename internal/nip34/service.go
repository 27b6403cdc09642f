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
	domain = normHost("", domain)
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
			if err != nil || u.Host == "" || normHost(u.Scheme, u.Host) != domain {
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

// normHost lower-cases host[:port] and drops the default port of scheme
// (of any web scheme when scheme is empty).
func normHost(scheme, hostport string) string {
	h := strings.ToLower(hostport)
	var defaults []string
	switch strings.ToLower(scheme) {
	case "https", "wss":
		defaults = []string{":443"}
	case "http", "ws":
		defaults = []string{":80"}
	case "":
		defaults = []string{":443", ":80"}
	}
	for _, p := range defaults {
		if s, ok := strings.CutSuffix(h, p); ok {
			return s
		}
	}
	return h
}
