// Package nostrurl resolves nostr:// clone URLs (NIP-34) to clone URLs git
// can fetch, through the named owner's announcement and GRASP list read from
// relays, and a NIP-05 owner through one HTTPS lookup; the purgatory asks it
// before fetching, and the caller screens what it returns under the address
// policy.
package nostrurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Defaults of NostrResolver as the sidecar uses it.
const (
	// DefaultNostrResolveRelays is how many relays are asked per URL.
	DefaultNostrResolveRelays = 4
	// DefaultNostrResolveTTL is how long a resolution is remembered.
	DefaultNostrResolveTTL = 10 * time.Minute
)

// KindGraspList is a user's list of GRASP servers (`g` tags), kind 10317.
const KindGraspList = 10317

// ErrNIP05Owner: nostr:// URLs naming a NIP-05 owner are not resolved when
// the resolver has no NIP05 lookup.
var ErrNIP05Owner = errors.New("purgatory: nostr:// URLs with a NIP-05 owner are not resolved")

// NostrResolver turns a nostr:// clone URL (a repository named by owner
// and identifier, possibly another owner's fork) into clone URLs git can
// fetch: those of the owner's repository announcement (kind 30617) and one
// per GRASP server of the owner's kind 10317 list, read from the URL's
// relay hints and Relays. The URLs it returns are clone URLs like any
// other: the caller screens and pins them under the address policy.
type NostrResolver struct {
	// Dial connects to a relay (under the outbound address policy).
	Dial func(ctx context.Context, url string) (*relay.Conn, error)
	// Relays are asked besides the URL's hints (the bootstrap relays).
	Relays []string
	// Timeout bounds one relay's answer; MaxRelays the relays asked per URL.
	Timeout   time.Duration
	MaxRelays int
	// TTL is how long a resolution is remembered, on Clock.
	TTL time.Duration
	// NIP05, when set, turns a NIP-05 owner into a public key and relay
	// hints (NIP05Lookup.Lookup); without it such URLs fail ErrNIP05Owner.
	NIP05 func(ctx context.Context, id string) (pubkey string, relays []string, err error)
	// Clock tells the time of the cache (nil: the wall clock).
	Clock clock.Clock

	cache ttlCache[[]string]
}

// Resolve returns the fetchable clone URLs u resolves to.
func (r *NostrResolver) Resolve(ctx context.Context, u nip34.NostrURL) ([]string, error) {
	if u.PubKey == "" {
		var err error
		if u, err = r.nip05Owner(ctx, u); err != nil {
			return nil, err
		}
	}
	key := u.PubKey + ":" + u.Identifier
	if urls, ok := r.cache.get(key, r.now(), r.TTL); ok {
		return urls, nil
	}

	relays := append(append([]string(nil), u.Relays...), r.Relays...)
	if len(relays) > r.MaxRelays {
		relays = relays[:r.MaxRelays]
	}
	var ann, list *nostr.Event
	var errs []error
	for _, url := range relays {
		a, l, err := r.ask(ctx, url, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a != nil && (ann == nil || a.CreatedAt > ann.CreatedAt) {
			ann = a
		}
		if l != nil && (list == nil || l.CreatedAt > list.CreatedAt) {
			list = l
		}
	}
	urls := cloneURLsOf(ann, list, u)
	if len(urls) == 0 {
		return nil, fmt.Errorf("purgatory: nostr:// %s/%s: no announcement or GRASP list found on %d relays: %w", u.PubKey, u.Identifier, len(relays), errors.Join(errs...))
	}
	r.cache.put(key, urls, r.now(), r.TTL)
	return urls, nil
}

func (r *NostrResolver) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// ask reads the owner's announcement and GRASP list from one relay.
func (r *NostrResolver) ask(ctx context.Context, url string, u nip34.NostrURL) (ann, list *nostr.Event, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	c, err := r.Dial(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "resolve", nostr.Filters{
		{Kinds: []int{nip34.KindRepoAnnouncement}, Authors: []string{u.PubKey}, Tags: nostr.TagMap{"d": {u.Identifier}}},
		{Kinds: []int{KindGraspList}, Authors: []string{u.PubKey}},
	})
	if err != nil {
		return nil, nil, err
	}
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return ann, list, fmt.Errorf("%s: %w", url, ctx.Err())
		case m, ok := <-sub.Messages():
			if !ok {
				return ann, list, fmt.Errorf("%s: subscription ended", url)
			}
			switch m.Type {
			case relay.MsgEOSE:
				return ann, list, nil
			case relay.MsgClosed:
				return ann, list, fmt.Errorf("%s: CLOSED %s", url, m.Reason)
			case relay.MsgEvent:
				ev := m.Event
				if ev.PubKey != u.PubKey || !ev.CheckID() {
					continue
				}
				if ok, _ := ev.CheckSignature(); !ok {
					continue
				}
				switch {
				case ev.Kind == nip34.KindRepoAnnouncement && ev.Tags.GetD() == u.Identifier:
					if ann == nil || ev.CreatedAt > ann.CreatedAt {
						ann = ev
					}
				case ev.Kind == KindGraspList:
					if list == nil || ev.CreatedAt > list.CreatedAt {
						list = ev
					}
				}
			}
		}
	}
}

// cloneURLsOf lists the announcement's clone URLs (nostr:// ones left out:
// one level of indirection only) and, per GRASP server of the list, the
// GRASP clone URL of the repository.
func cloneURLsOf(ann, list *nostr.Event, u nip34.NostrURL) []string {
	var out []string
	if ann != nil {
		for _, tag := range ann.Tags {
			if len(tag) >= 2 && tag[0] == "clone" {
				for _, c := range tag[1:] {
					if !nip34.IsNostrURL(c) {
						out = append(out, c)
					}
				}
			}
		}
	}
	if list != nil {
		npub, err := nip19.EncodePublicKey(u.PubKey)
		if err == nil {
			for _, tag := range list.Tags {
				if len(tag) >= 2 && tag[0] == "g" {
					if base, ok := graspBase(tag[1]); ok {
						out = append(out, base+"/"+npub+"/"+url.PathEscape(u.Identifier)+".git")
					}
				}
			}
		}
	}
	return out
}

// graspBase is the HTTP base of a GRASP server given as a relay or HTTP
// URL (wss:// → https://, ws:// → http://).
func graspBase(s string) (string, bool) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	pu, err := url.Parse(s)
	if err != nil || pu.Host == "" {
		return "", false
	}
	switch pu.Scheme {
	case "wss", "https":
		pu.Scheme = "https"
	case "ws", "http":
		pu.Scheme = "http"
	default:
		return "", false
	}
	return strings.TrimSuffix(pu.Scheme+"://"+pu.Host+pu.Path, "/"), true
}
