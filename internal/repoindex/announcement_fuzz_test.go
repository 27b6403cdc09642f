package repoindex

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// FuzzParseAnnouncement: relays taken from an announcement are normalized,
// distinct, never the own relay, and within the limit.
func FuzzParseAnnouncement(f *testing.F) {
	f.Add("repo", "wss://relay.example.com ws://127.0.0.1:7777 wss://relay.example.com/", "https://git.example.com/npub1abc/repo.git", uint8(3))
	f.Add("x", "ws://[::1] ws://169.254.169.254/ http://no wss://UPPER.example:443/p/", "ext::sh -c x", uint8(0))
	f.Add("", "", "", uint8(1))
	f.Add("r", "wss://own.example wss://a wss://b wss://c", "http://h:80/npub1x/r.git", uint8(2))
	const own = "wss://own.example"
	f.Fuzz(func(t *testing.T, d, relays, clone string, max uint8) {
		ev := &nostr.Event{Kind: 30617, PubKey: strings.Repeat("a", 64), Tags: nostr.Tags{{"d", d}, append(nostr.Tag{"relays"}, strings.Fields(relays)...), {"clone", clone}}}
		a, err := ParseAnnouncement(ev, func(u string) bool { return u == own }, int(max))
		if err != nil {
			if d != "" {
				t.Fatalf("refused announcement with d=%q: %v", d, err)
			}
			return
		}
		if a.Ref != nip34.RepoRef(ev.PubKey, d) {
			t.Fatalf("ref %q", a.Ref)
		}
		if max > 0 && len(a.Relays) > int(max) {
			t.Fatalf("%d relays over limit %d", len(a.Relays), max)
		}
		seen := map[string]bool{}
		for _, r := range a.Relays {
			if seen[r] || r == own {
				t.Fatalf("duplicate or own relay %q in %v", r, a.Relays)
			}
			seen[r] = true
			if again, err := relay.NormalizeURL(r); err != nil || again != r {
				t.Fatalf("relay %q is not normalized (%q, %v)", r, again, err)
			}
		}
	})
}
