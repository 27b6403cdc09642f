package relay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// ErrBadURL is returned for relay URLs that cannot be used.
var ErrBadURL = errors.New("unusable relay URL")

// NormalizeURL returns the canonical form of a relay URL: ws or wss,
// lower-case host, no default port, no trailing slash, no query or fragment.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > 512 {
		return "", fmt.Errorf("%w: empty or too long", ErrBadURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "ws" && scheme != "wss" {
		return "", fmt.Errorf("%w: scheme %q is not ws or wss", ErrBadURL, u.Scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: credentials in URL", ErrBadURL)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	}
	if strings.Contains(host, ":") {
		if a, err := netip.ParseAddr(host); err != nil || a.Zone() != "" {
			return "", fmt.Errorf("%w: malformed or zoned IPv6 host", ErrBadURL)
		}
	} else if strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		// Internationalised names arrive in punycode.
		return "", fmt.Errorf("%w: host has characters outside [a-z0-9.-_]", ErrBadURL)
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
