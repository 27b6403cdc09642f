// Package netpolicy is the outbound address policy for destinations learnt
// from announcements: relay URLs (relays tags, relays derived from clone
// URLs) and git clone URLs. Announcements are untrusted input, so such a
// destination may only use an allowed scheme (ws/wss for relays;
// https/http/git for clone URLs) and may only reach globally routable
// unicast addresses, unless the operator allows a CIDR or a host name
// explicitly (--dial.allow).
//
// The address check runs where the connection is made: DialContext
// resolves the host itself, refuses if any address is refused, and connects
// to the checked address; the dialer's Control function checks the socket's
// peer address once more, so neither DNS rebinding nor a resolver returning
// a different answer the second time can bypass it. git is guarded by
// GitRunner: the remote of every network command is checked before git
// starts, and for http(s) the checked addresses are pinned with
// http.curloptResolve.
//
// Refused addresses (see Classify): loopback, RFC 1918 and unique-local
// private ranges, link-local, cloud metadata endpoints (169.254.169.254,
// 169.254.170.2, 100.100.100.200, fd00:ec2::254), multicast, unspecified
// and "this network", carrier-grade NAT 100.64.0.0/10, documentation and
// benchmarking ranges, 240.0.0.0/4, discard-only and Teredo IPv6, and NAT64
// or 6to4 addresses whose embedded IPv4 address is refused.
//
// Configured URLs (own relay, bootstrap and trusted relays) are the
// operator's and do not go through the policy.
package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// ErrRefused is wrapped by every refusal (a *RefusedError).
var ErrRefused = errors.New("refused by the outbound address policy")

// Kind is the kind of destination, a label value of the refusal metric.
type Kind string

// Destination kinds.
const (
	KindRelay Kind = "relay"
	KindClone Kind = "clone"
	// KindNIP05 is the domain of a NIP-05 identifier named by a nostr://
	// clone URL (its /.well-known/nostr.json document).
	KindNIP05 Kind = "nip05"
)

// kinds and reasons are every value of the refusal metric's labels; each
// pair's series exists at 0 from New, so the first refusal is an increase
// (TestRefusalSeriesAtZero checks the lists hold every constant).
var (
	kinds   = []Kind{KindRelay, KindClone, KindNIP05}
	reasons = []string{
		ReasonScheme, ReasonURL, ReasonLoopback, ReasonPrivate, ReasonLinkLocal,
		ReasonMetadata, ReasonMulticast, ReasonUnspecified, ReasonReserved, ReasonResolve,
	}
)

// Kinds returns every destination kind, the kind label's values.
func Kinds() []Kind { return slices.Clone(kinds) }

// Reasons returns every refusal reason, the reason label's values.
func Reasons() []string { return slices.Clone(reasons) }

// RefusedError tells which destination was refused and why.
type RefusedError struct {
	Kind   Kind
	Dest   string // URL or host:port
	Reason string // one of the Reason constants
	Detail string
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%s %s refused: %s", e.Kind, clip(e.Dest), e.Reason)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Is makes a refused clone URL match gitx.ErrInvalid as well: like an
// invalid URL, it was refused before git ran.
func (e *RefusedError) Is(target error) bool {
	return e.Kind == KindClone && target == gitx.ErrInvalid
}

// Reason returns the refusal reason of err, or "" if err is no refusal.
func Reason(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// Resolver looks up host addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// DialFunc connects to a network address.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options configure a Policy. The zero value refuses every non-public
// destination and uses the system resolver.
type Options struct {
	// Allow are CIDRs, IP addresses or host names that may be reached even
	// though they are not public (--dial.allow). A host name matches
	// exactly (case-insensitive) and skips the address check.
	Allow []string
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver Resolver
	// Dial, when set, replaces the final connect to an already checked
	// address (tests use it to prove nothing else is ever dialled). The
	// default is a net.Dialer whose Control function re-checks the peer.
	Dial DialFunc
	// DialTimeout bounds one connect of the default dialer (default
	// relay.DefaultConnectTimeout, as the configuration's connect_timeout).
	DialTimeout time.Duration
	// RememberMax bounds the refused destinations remembered so that each
	// is logged once (default 4096; when full, further refusals are
	// counted but no longer logged).
	RememberMax int
	// Logger receives one warning per refused destination.
	Logger *zap.Logger
	// Registerer receives ngit_sync_dial_refused_total; nil registers none.
	Registerer prometheus.Registerer
}

// Policy decides which destinations from announcements may be reached.
// All methods are safe for concurrent use.
type Policy struct {
	nets   []netip.Prefix
	hosts  map[string]bool
	res    Resolver
	dial   DialFunc
	strict *net.Dialer
	plain  *net.Dialer
	log    *zap.Logger

	refused *prometheus.CounterVec

	mu          sync.Mutex
	logged      map[string]bool
	rememberMax int
}

// New builds a policy; it fails on an Allow entry that is neither a CIDR,
// an IP address nor a host name.
func New(opts Options) (*Policy, error) {
	p := &Policy{
		hosts: map[string]bool{}, res: opts.Resolver, dial: opts.Dial, log: opts.Logger,
		logged: map[string]bool{}, rememberMax: opts.RememberMax,
	}
	for _, a := range opts.Allow {
		a = strings.TrimSpace(a)
		if pfx, err := netip.ParsePrefix(a); err == nil {
			p.nets = append(p.nets, pfx.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			p.nets = append(p.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		h := canonicalHost(a)
		if !validHostName(h) {
			return nil, fmt.Errorf("netpolicy: allow entry %q is neither a CIDR, an IP address nor a host name", a)
		}
		p.hosts[h] = true
	}
	if p.res == nil {
		p.res = net.DefaultResolver
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if p.rememberMax <= 0 {
		p.rememberMax = 4096
	}
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = relay.DefaultConnectTimeout
	}
	p.strict = &net.Dialer{Timeout: timeout, ControlContext: p.control}
	p.plain = &net.Dialer{Timeout: timeout}
	p.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ngit_sync_dial_refused_total",
		Help: "Destinations from announcements refused by the outbound address policy, by kind (relay, clone, nip05) and reason.",
	}, []string{"kind", "reason"})
	for _, k := range kinds {
		for _, r := range reasons {
			p.refused.WithLabelValues(string(k), r)
		}
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(p.refused); err != nil {
			return nil, fmt.Errorf("netpolicy: register metrics: %w", err)
		}
	}
	return p, nil
}

// AddrReason returns "" when a may be reached (it is public or inside an
// allowed CIDR), otherwise the reason it is refused.
func (p *Policy) AddrReason(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return ""
		}
	}
	return Classify(a)
}

// HostAllowed reports whether host was allowed by name.
func (p *Policy) HostAllowed(host string) bool {
	return p.hosts[canonicalHost(host)]
}

// CheckRelayURL checks a relay URL without resolving it: the scheme (ws,
// wss), its form, and its host when that is an IP address or a localhost
// name. Host names are checked when dialled (DialContext).
func (p *Policy) CheckRelayURL(raw string) error {
	_, err := p.parse(KindRelay, raw, "ws", "wss")
	return err
}

// CheckCloneURL is CheckRelayURL for clone URLs (https, http, git).
func (p *Policy) CheckCloneURL(raw string) error {
	_, err := p.parse(KindClone, raw, "https", "http", "git")
	return err
}

// ResolveCloneURL checks a clone URL completely: its form, and every
// address its host resolves to. It returns the checked addresses (none
// when the host is an IP address or allowed by name).
func (p *Policy) ResolveCloneURL(ctx context.Context, raw string) (*url.URL, []netip.Addr, error) {
	u, err := p.parse(KindClone, raw, "https", "http", "git")
	if err != nil {
		return nil, nil, err
	}
	host := canonicalHost(u.Hostname())
	if p.hosts[host] {
		return u, nil, nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return u, nil, nil // checked by parse
	}
	addrs, err := p.resolve(ctx, KindClone, "ip", host)
	if err != nil {
		return nil, nil, err
	}
	return u, addrs, nil
}

// parse checks a URL's form and scheme, and its host when no resolution
// is needed. Refusals are counted and logged.
func (p *Policy) parse(kind Kind, raw string, schemes ...string) (*url.URL, error) {
	if raw == "" || len(raw) > 2048 || raw[0] == '-' {
		return nil, p.refuse(kind, raw, ReasonURL, "empty, too long or starts with '-'")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < 0x21 || raw[i] == 0x7f {
			return nil, p.refuse(kind, raw, ReasonURL, "control character or space")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, p.refuse(kind, raw, ReasonURL, "unparsable")
	}
	scheme := strings.ToLower(u.Scheme)
	ok := false
	for _, s := range schemes {
		ok = ok || scheme == s
	}
	if !ok {
		return nil, p.refuse(kind, raw, ReasonScheme, "scheme "+clipN(scheme, 16)+" not allowed")
	}
	if u.Opaque != "" || u.User != nil {
		return nil, p.refuse(kind, raw, ReasonURL, "opaque URL or credentials")
	}
	host := canonicalHost(u.Hostname())
	if host == "" {
		return nil, p.refuse(kind, raw, ReasonURL, "no host")
	}
	if port := u.Port(); port != "" {
		if n, err := parsePort(port); err != nil || n == 0 {
			return nil, p.refuse(kind, raw, ReasonURL, "bad port")
		}
	}
	if p.hosts[host] {
		return u, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, p.refuse(kind, raw, ReasonURL, "zoned address")
		}
		if r := p.AddrReason(a); r != "" {
			return nil, p.refuse(kind, raw, r, a.String())
		}
		return u, nil
	}
	if !validHostName(host) {
		return nil, p.refuse(kind, raw, ReasonURL, "bad host name")
	}
	if isLocalhost(host) && len(p.localhost()) == 0 {
		return nil, p.refuse(kind, raw, ReasonLoopback, host)
	}
	return u, nil
}

// localhost returns the loopback addresses a localhost name may reach.
func (p *Policy) localhost() []netip.Addr {
	var out []netip.Addr
	for _, a := range localhostAddrs {
		if p.AddrReason(a) == "" {
			out = append(out, a)
		}
	}
	return out
}

var localhostAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}

// resolve looks host up and checks every address; any refused address
// refuses the host (a name that mixes public and private addresses is
// either misconfigured or an attack).
func (p *Policy) resolve(ctx context.Context, kind Kind, network, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if isLocalhost(host) {
		// RFC 6761: never ask DNS; dial the allowed loopback addresses.
		if addrs = p.localhost(); len(addrs) == 0 {
			return nil, p.refuse(kind, host, ReasonLoopback, host)
		}
	} else {
		var err error
		addrs, err = p.res.LookupNetIP(ctx, network, host)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, p.refuse(kind, host, ReasonResolve, err.Error())
		}
	}
	if len(addrs) == 0 {
		return nil, p.refuse(kind, host, ReasonResolve, "no addresses")
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if r := p.AddrReason(a); r != "" {
			return nil, p.refuse(kind, host, r, a.String())
		}
		out = append(out, a)
	}
	return out, nil
}

// Resolver returns a resolver that answers only with addresses the policy
// allows: a name allowed by name resolves as usual, any other name fails
// (with a refusal, counted and logged once) unless every address it
// resolves to is allowed. Give it to code that resolves on its own, such
// as the purgatory pinning git's addresses.
func (p *Policy) Resolver(kind Kind) Resolver {
	return resolverFunc(func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		h := canonicalHost(host)
		if p.hosts[h] {
			return p.res.LookupNetIP(ctx, network, h)
		}
		if a, err := netip.ParseAddr(h); err == nil {
			if r := p.AddrReason(a); r != "" {
				return nil, p.refuse(kind, h, r, a.String())
			}
			return []netip.Addr{a}, nil
		}
		return p.resolve(ctx, kind, network, h)
	})
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

// DialContext connects to address (host:port) for a relay: host names
// allowed by name are dialled as they are; other names are resolved and
// every address checked, then the checked addresses are dialled in turn.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return p.dialKind(ctx, KindRelay, network, address)
}

// Dialer returns DialContext for destinations of the given kind (the kind
// only labels refusals).
func (p *Policy) Dialer(kind Kind) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return p.dialKind(ctx, kind, network, address)
	}
}

func (p *Policy) dialKind(ctx context.Context, kind Kind, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, p.refuse(kind, address, ReasonURL, "bad address")
	}
	host = canonicalHost(host)
	if p.hosts[host] {
		if p.dial != nil {
			return p.dial(ctx, network, address)
		}
		return p.plain.DialContext(ctx, network, address)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		if r := p.AddrReason(a); r != "" {
			return nil, p.refuse(kind, address, r, a.String())
		}
		addrs = []netip.Addr{a.Unmap().WithZone("")}
	} else {
		lookup := "ip"
		switch network {
		case "tcp4":
			lookup = "ip4"
		case "tcp6":
			lookup = "ip6"
		}
		addrs, err = p.resolve(ctx, kind, lookup, host)
		if err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, a := range addrs {
		target := net.JoinHostPort(a.String(), port)
		var c net.Conn
		if p.dial != nil {
			c, err = p.dial(ctx, network, target)
		} else {
			c, err = p.strict.DialContext(ctx, network, target)
		}
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dial %s: %w", address, errors.Join(errs...))
}

// Control checks the peer address of a socket about to connect; it is the
// last line of defence of the default dialer.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return p.refuse(KindRelay, address, ReasonURL, "bad address")
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return p.refuse(KindRelay, address, ReasonURL, "peer is not an IP address")
	}
	if r := p.AddrReason(a); r != "" {
		return p.refuse(KindRelay, address, r, "at connect")
	}
	return nil
}

func (p *Policy) control(_ context.Context, network, address string, c syscall.RawConn) error {
	return p.Control(network, address, c)
}

// HTTPClient returns a client whose connections go through DialContext:
// for websocket handshakes and NIP-11 documents of discovered relays. It
// ignores proxy settings (a proxy would resolve the name on our behalf)
// and does not follow redirects.
func (p *Policy) HTTPClient(timeout time.Duration) *http.Client {
	return p.HTTPClientFor(KindRelay, timeout)
}

// HTTPClientFor is HTTPClient for destinations of the given kind (the kind
// labels refusals), such as KindNIP05 for NIP-05 documents.
func (p *Policy) HTTPClientFor(kind Kind, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            p.Dialer(kind),
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  30 * time.Second,
			MaxIdleConns:           16,
			IdleConnTimeout:        30 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refuse counts a refusal, logs it the first time this destination is
// refused, and returns the error.
func (p *Policy) refuse(kind Kind, dest, reason, detail string) error {
	p.refused.WithLabelValues(string(kind), reason).Inc()
	key := string(kind) + " " + dest
	p.mu.Lock()
	first := !p.logged[key] && len(p.logged) < p.rememberMax
	if first {
		p.logged[key] = true
	}
	p.mu.Unlock()
	if first {
		p.log.Warn("destination refused by the outbound address policy",
			zap.String("kind", string(kind)), zap.String("destination", clip(dest)),
			zap.String("reason", reason), zap.String("detail", clip(detail)))
	}
	return &RefusedError{Kind: kind, Dest: dest, Reason: reason, Detail: detail}
}

func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func isLocalhost(h string) bool {
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// validHostName: LDH labels of 1..63 bytes, 253 bytes in all.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad port")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

func clip(s string) string { return clipN(s, 200) }

func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
