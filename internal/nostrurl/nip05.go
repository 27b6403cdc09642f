package nostrurl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Defaults of NIP05Lookup as the sidecar uses it.
const (
	// DefaultNIP05Timeout bounds one NIP-05 document request.
	DefaultNIP05Timeout = 10 * time.Second
	// DefaultNIP05MaxBody is the largest nostr.json document read.
	DefaultNIP05MaxBody = 64 << 10
	// DefaultNIP05MaxRelays is how many of the document's relay hints are
	// kept.
	DefaultNIP05MaxRelays = 4
)

// ErrNIP05: a NIP-05 identifier could not be resolved to a public key.
var ErrNIP05 = errors.New("purgatory: nip-05 lookup failed")

// NIP05Lookup resolves a NIP-05 identifier (name@domain, or domain for
// _@domain) to a public key and relay hints by one GET of
// https://<domain>/.well-known/nostr.json?name=<name>. The domain is named
// in an untrusted event, so the request goes through Client, whose dialer
// must apply the outbound address policy; redirects are refused (NIP-05:
// fetchers must ignore them), the body is bounded, and the name and public
// key are validated. Found keys are remembered for TTL (failures are not,
// as the npub path's).
type NIP05Lookup struct {
	// Client makes the request; its dialer applies the address policy.
	// Its redirect policy is overridden: no redirect is followed.
	Client *http.Client
	// Timeout bounds one request; MaxBody the document's size.
	Timeout time.Duration
	MaxBody int64
	// MaxRelays caps the document's relay hints kept per identifier.
	MaxRelays int
	// TTL is how long a found key is remembered (a failure is asked again
	// at the next attempt, which the purgatory's backoff paces).
	TTL time.Duration
	// Clock tells the time of cache entries (default clock.Real).
	Clock clock.Clock

	cache ttlCache[nip05Result]
}

type nip05Result struct {
	pubkey string
	relays []string
}

// Lookup returns the public key the identifier names and the relays the
// document lists for it (normalised, at most MaxRelays).
func (l *NIP05Lookup) Lookup(ctx context.Context, id string) (pubkey string, relays []string, err error) {
	name, domain, err := parseNIP05(id)
	if err != nil {
		return "", nil, err
	}
	key := name + "@" + domain
	if c, ok := l.cache.get(key, l.now(), l.TTL); ok {
		return c.pubkey, c.relays, nil
	}
	pubkey, relays, err = l.fetch(ctx, name, domain)
	if err != nil {
		return "", nil, err
	}
	l.cache.put(key, nip05Result{pubkey: pubkey, relays: relays}, l.now(), l.TTL)
	return pubkey, relays, nil
}

func (l *NIP05Lookup) now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}

func (l *NIP05Lookup) fetch(ctx context.Context, name, domain string) (string, []string, error) {
	fail := func(format string, a ...any) (string, []string, error) {
		return "", nil, fmt.Errorf("%w: %s@%s: %s", ErrNIP05, name, domain, fmt.Sprintf(format, a...))
	}
	if l.Client == nil {
		return fail("no HTTP client")
	}
	if l.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.Timeout)
		defer cancel()
	}
	target := "https://" + domain + "/.well-known/nostr.json?name=" + url.QueryEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fail("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	client := *l.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		// Wrapped: a refusal of the address policy stays visible.
		return "", nil, fmt.Errorf("%w: %s@%s: %w", ErrNIP05, name, domain, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fail("redirect (HTTP %d) refused", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return fail("HTTP %d", resp.StatusCode)
	}
	max := l.MaxBody
	if max <= 0 {
		max = DefaultNIP05MaxBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return fail("read: %v", err)
	}
	if int64(len(body)) > max {
		return fail("document larger than %d bytes", max)
	}
	var doc struct {
		Names  map[string]string   `json:"names"`
		Relays map[string][]string `json:"relays"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fail("invalid JSON: %v", err)
	}
	pk, ok := doc.Names[name]
	if !ok {
		return fail("name not listed")
	}
	if !nostr.IsValidPublicKey(pk) {
		return fail("invalid public key %q", clipString(pk, 80))
	}
	maxRelays := l.MaxRelays
	if maxRelays <= 0 {
		maxRelays = DefaultNIP05MaxRelays
	}
	var relays []string
	seen := map[string]bool{}
	for _, r := range doc.Relays[pk] {
		if len(relays) >= maxRelays {
			break
		}
		if n, err := relay.NormalizeURL(r); err == nil && !seen[n] {
			seen[n] = true
			relays = append(relays, n)
		}
	}
	return pk, relays, nil
}

// parseNIP05 splits a NIP-05 identifier into its lower-case local part
// (NIP-05: a-z0-9-_.; "_" when absent) and domain (a host name or IP
// address, with an optional port).
func parseNIP05(id string) (name, domain string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q: %s", ErrNIP05, clipString(id, 80), why)
	}
	if id == "" || len(id) > 320 {
		return bad("empty or too long")
	}
	id = strings.ToLower(id)
	name, domain = "_", id
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		name, domain = id[:i], id[i+1:]
	}
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return bad("local part outside a-z0-9-_.")
	}
	host, port := domain, ""
	if h, p, err := net.SplitHostPort(domain); err == nil {
		host, port = h, p
		if n, err := parsePortNumber(p); err != nil || n == 0 {
			return bad("bad port")
		}
	}
	if port == "" && strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // [IPv6] without a port
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("zoned address")
		}
		if a.Is6() && port == "" {
			domain = "[" + host + "]"
		}
		return name, domain, nil
	}
	if host == "" || len(host) > 253 || !strings.Contains(host, ".") ||
		strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" ||
		strings.HasPrefix(host, ".") || strings.HasPrefix(host, "-") || strings.Contains(host, "..") {
		return bad("bad domain")
	}
	return name, domain, nil
}

func parsePortNumber(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad port")
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// nip05Owner fills in the public key of a nostr:// URL naming a NIP-05
// owner, and adds the NIP-05 document's relays after the URL's hints.
func (r *NostrResolver) nip05Owner(ctx context.Context, u nip34.NostrURL) (nip34.NostrURL, error) {
	if r.NIP05 == nil {
		return u, fmt.Errorf("%w: %s", ErrNIP05Owner, u.NIP05)
	}
	pk, relays, err := r.NIP05(ctx, u.NIP05)
	if err != nil {
		return u, fmt.Errorf("purgatory: nostr:// %s/%s: %w", u.NIP05, u.Identifier, err)
	}
	u.PubKey = pk
	u.Relays = append(append([]string(nil), u.Relays...), relays...)
	return u, nil
}
