package nip34

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
)

// ErrNostrURL: a nostr:// clone URL that cannot be parsed.
var ErrNostrURL = errors.New("nip34: invalid nostr:// clone url")

// NostrURL is a parsed nostr:// clone URL (NIP-34: the form git-remote-nostr
// helpers understand): nostr://<naddr>, nostr://<npub|nip05>/<identifier>
// or nostr://<npub|nip05>/<relay-hint>/<identifier>, the relay hint and the
// identifier percent-encoded. It names a repository announcement, not a
// place git can fetch from: it is resolved through that announcement.
type NostrURL struct {
	// PubKey is the owner's hex public key (from an npub or naddr); empty
	// for a NIP-05 owner.
	PubKey string
	// NIP05 is the owner's NIP-05 identifier when the URL names one.
	NIP05 string
	// Identifier is the repository's d tag.
	Identifier string
	// Relays are the relay hints as WebSocket URLs (a bare domain means
	// wss://domain).
	Relays []string
}

// IsNostrURL tells whether a clone URL uses the nostr:// scheme; such a
// URL is never handed to git as it is.
func IsNostrURL(raw string) bool {
	return len(raw) >= 8 && strings.EqualFold(raw[:8], "nostr://")
}

// ParseNostrURL parses a nostr:// clone URL.
func ParseNostrURL(raw string) (NostrURL, error) {
	bad := func(why string) (NostrURL, error) {
		return NostrURL{}, fmt.Errorf("%w: %q: %s", ErrNostrURL, raw, why)
	}
	if !IsNostrURL(raw) || len(raw) > 2048 {
		return bad("not a nostr:// URL of at most 2048 bytes")
	}
	rest := strings.TrimSuffix(raw[8:], "/")
	parts := strings.Split(rest, "/")
	if len(parts) == 1 {
		prefix, v, err := nip19.Decode(parts[0])
		if err != nil || prefix != "naddr" {
			return bad("one segment must be an naddr")
		}
		ep, ok := v.(nostr.EntityPointer)
		if !ok || ep.Kind != KindRepoAnnouncement || ep.Identifier == "" {
			return bad("the naddr does not name a repository announcement")
		}
		var relays []string
		for _, r := range ep.Relays {
			if u, ok := relayHint(r); ok {
				relays = append(relays, u)
			}
		}
		return NostrURL{PubKey: ep.PublicKey, Identifier: ep.Identifier, Relays: relays}, nil
	}
	if len(parts) > 3 {
		return bad("too many path segments")
	}
	var out NostrURL
	owner := parts[0]
	switch {
	case strings.HasPrefix(owner, "npub1"):
		prefix, v, err := nip19.Decode(owner)
		pk, ok := v.(string)
		if err != nil || prefix != "npub" || !ok {
			return bad("invalid npub")
		}
		out.PubKey = pk
	case strings.Contains(owner, "@") || strings.Contains(owner, "."):
		out.NIP05 = strings.ToLower(owner)
	default:
		return bad("the owner is neither an npub nor a NIP-05 identifier")
	}
	id, err := url.PathUnescape(parts[len(parts)-1])
	if err != nil || id == "" || strings.ContainsAny(id, "/\x00") {
		return bad("invalid identifier")
	}
	out.Identifier = id
	if len(parts) == 3 {
		hint, err := url.PathUnescape(parts[1])
		if err != nil {
			return bad("invalid relay hint")
		}
		u, ok := relayHint(hint)
		if !ok {
			return bad("invalid relay hint")
		}
		out.Relays = []string{u}
	}
	return out, nil
}

// relayHint turns a relay hint (a bare domain, or a ws:// or wss:// URL)
// into a WebSocket URL.
func relayHint(h string) (string, bool) {
	if h == "" {
		return "", false
	}
	if !strings.Contains(h, "://") {
		h = "wss://" + h
	}
	u, err := url.Parse(h)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return "", false
	}
	return u.String(), true
}
