package netpolicy

import (
	"context"
	"net/http"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Relays connects to relays: the operator's configured ones (own,
// bootstrap, trusted) as they are, relays learnt from announcements only
// through the policy.
type Relays struct {
	p          *Policy
	configured map[string]bool
	client     *http.Client // for configured relays (nil: the default)
	policy     *http.Client
}

// Relays returns the dialer for relays; configured are the operator's
// relay URLs (exempt from the policy, in their given and normalized
// forms), reached with client (nil: http.DefaultClient).
func (p *Policy) Relays(configured []string, client *http.Client) *Relays {
	r := &Relays{p: p, configured: map[string]bool{}, client: client, policy: p.HTTPClient(0)}
	for _, u := range configured {
		r.configured[u] = true
		if norm, err := relay.NormalizeURL(u); err == nil {
			r.configured[norm] = true
		}
	}
	return r
}

// Allow returns nil when url may be connected to: it is configured, or the
// policy lets it through (the refusal is logged once and counted).
func (r *Relays) Allow(url string) error {
	if r.configured[url] {
		return nil
	}
	return r.p.CheckRelayURL(url)
}

// clientFor is the HTTP client that reaches url.
func (r *Relays) clientFor(url string) *http.Client {
	if r.configured[url] {
		return r.client
	}
	return r.policy
}

// Dial connects to the relay at url with opts, through the policy unless
// url is configured.
func (r *Relays) Dial(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error) {
	if err := r.Allow(url); err != nil {
		return nil, err
	}
	if !r.configured[url] {
		opts.HTTPClient = r.policy
	}
	return relay.Dial(ctx, url, opts)
}

// Limits reads the limits url announces in its NIP-11 document, through
// the policy unless url is configured.
func (r *Relays) Limits(ctx context.Context, url string) (relay.Limits, error) {
	return relay.FetchLimits(ctx, r.clientFor(url), url)
}
