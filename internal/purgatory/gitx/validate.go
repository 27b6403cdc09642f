package gitx

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// MaxIdentifierLen bounds a repository identifier (the d tag) used as a path.
const MaxIdentifierLen = 100

// ValidateIdentifier checks that a repository identifier can safely become a
// path component: 1..MaxIdentifierLen bytes of [A-Za-z0-9._-], not starting
// with '-' or '.', and not containing "..".
func ValidateIdentifier(id string) error {
	if id == "" || len(id) > MaxIdentifierLen {
		return fmt.Errorf("%w: identifier length %d", ErrInvalid, len(id))
	}
	if id[0] == '-' || id[0] == '.' {
		return fmt.Errorf("%w: identifier %q starts with %q", ErrInvalid, id, id[0])
	}
	if strings.Contains(id, "..") {
		return fmt.Errorf("%w: identifier %q contains \"..\"", ErrInvalid, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: identifier %q has character %q", ErrInvalid, id, c)
		}
	}
	return nil
}

// ValidPubKey reports whether s is a 64-char lowercase hex public key.
func ValidPubKey(s string) bool { return len(s) == 64 && isLowerHex(s) }

// ValidOID reports whether s is a full SHA-1 (40) or SHA-256 (64) object id
// in lowercase hex.
func ValidOID(s string) bool { return (len(s) == 40 || len(s) == 64) && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidateRefName checks a full ref name under refs/heads/, refs/tags/ or
// refs/nostr/ against git's ref-format rules (a conservative subset).
func ValidateRefName(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: ref %q: %s", ErrInvalid, name, why) }
	if len(name) > 1024 {
		return bad("too long")
	}
	var rest string
	switch {
	case strings.HasPrefix(name, "refs/heads/"):
		rest = name[len("refs/heads/"):]
	case strings.HasPrefix(name, "refs/tags/"):
		rest = name[len("refs/tags/"):]
	case strings.HasPrefix(name, "refs/nostr/"):
		rest = name[len("refs/nostr/"):]
	default:
		return bad("not under refs/heads, refs/tags or refs/nostr")
	}
	if rest == "" || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") {
		return bad("empty or trailing component")
	}
	if strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") {
		return bad("forbidden sequence")
	}
	for _, comp := range strings.Split(rest, "/") {
		if comp == "" || comp[0] == '.' || comp[0] == '-' || strings.HasSuffix(comp, ".lock") {
			return bad("bad component")
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x21 || c == 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return bad("forbidden character")
		}
	}
	if name == "refs/heads/HEAD" {
		return bad("reserved")
	}
	return nil
}

// RepoPath returns <gitDir>/<npub>/<identifier>.git for an owner's hex public
// key, after validating both parts and checking the result stays inside
// gitDir.
func RepoPath(gitDir, ownerHex, identifier string) (string, error) {
	if !ValidPubKey(ownerHex) {
		return "", fmt.Errorf("%w: owner pubkey %q", ErrInvalid, ownerHex)
	}
	if err := ValidateIdentifier(identifier); err != nil {
		return "", err
	}
	npub, err := Npub(ownerHex)
	if err != nil {
		return "", fmt.Errorf("%w: npub: %v", ErrInvalid, err)
	}
	root, err := filepath.Abs(gitDir)
	if err != nil {
		return "", fmt.Errorf("%w: git dir: %v", ErrInvalid, err)
	}
	p := filepath.Join(root, npub, identifier+".git")
	if rel, err := filepath.Rel(root, p); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%w: repo path %q escapes %q", ErrInvalid, p, root)
	}
	return p, nil
}

// CloneURL is a validated clone URL.
type CloneURL struct {
	// Raw is the URL as it will be passed to git.
	Raw string
	// Domain is host[:port] in lower case: the throttling key.
	Domain string
	// Host is the host name or IP without port.
	Host string
}

// ParseCloneURL accepts http, https and git URLs with a host, no user info,
// no leading '-', and no control characters.
func ParseCloneURL(raw string) (CloneURL, error) {
	bad := func(why string) (CloneURL, error) {
		return CloneURL{}, fmt.Errorf("%w: clone url %q: %s", ErrInvalid, raw, why)
	}
	if raw == "" || raw[0] == '-' || len(raw) > 2048 {
		return bad("empty, too long or starts with '-'")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < 0x21 || raw[i] == 0x7f {
			return bad("control character or space")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	switch u.Scheme {
	case "http", "https", "git":
	default:
		return bad("scheme must be http, https or git")
	}
	if u.User != nil {
		return bad("user info not allowed")
	}
	if u.Hostname() == "" {
		return bad("no host")
	}
	return CloneURL{Raw: raw, Domain: NormalizeDomain(u.Scheme, u.Host), Host: strings.ToLower(u.Hostname())}, nil
}

// NormalizeDomain lower-cases host[:port] and drops the scheme's default
// port (nip34.NormalizeHost): the key of the per-domain limits.
func NormalizeDomain(scheme, hostport string) string { return nip34.NormalizeHost(scheme, hostport) }

// Resolver looks up host addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// ErrPrivateAddress is returned when a clone URL's host is (or resolves to) a
// loopback, private, link-local, unspecified or otherwise non-public address.
var ErrPrivateAddress = fmt.Errorf("%w: non-public address", ErrInvalid)

// CheckPublicHost fails with ErrPrivateAddress if host is or resolves to an
// address that announcements must not make us reach.
func CheckPublicHost(ctx context.Context, r Resolver, host string) error {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return fmt.Errorf("%w: %s", ErrPrivateAddress, host)
		}
		addrs, err = r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	for _, a := range addrs {
		if !IsPublic(a) {
			return fmt.Errorf("%w: %s is %s", ErrPrivateAddress, host, a)
		}
	}
	return nil
}

var metadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// IsPublic reports whether a is a globally routable unicast address.
func IsPublic(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range metadataPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// PinAddress resolves u's host, checks every address is public (unless
// allowPrivate), and returns the git -c setting that makes the http(s)
// transport connect to the checked address only (http.curloptResolve), so a
// second DNS answer cannot point the fetch elsewhere. IP literals need no
// pinning; git:// has no such setting, so none is returned for it (the
// sidecar's address policy, internal/netpolicy, pins git:// by replacing the
// host with the checked address).
func PinAddress(ctx context.Context, r Resolver, u CloneURL, allowPrivate bool) ([]string, error) {
	if _, err := netip.ParseAddr(u.Host); err == nil {
		if !allowPrivate {
			return nil, CheckPublicHost(ctx, r, u.Host)
		}
		return nil, nil
	}
	parsed, err := url.Parse(u.Raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" {
		if !allowPrivate {
			return nil, CheckPublicHost(ctx, r, u.Host)
		}
		return nil, nil
	}
	if !allowPrivate && (u.Host == "localhost" || strings.HasSuffix(u.Host, ".localhost")) {
		return nil, fmt.Errorf("%w: %s", ErrPrivateAddress, u.Host)
	}
	addrs, err := r.LookupNetIP(ctx, "ip", u.Host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", u.Host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", u.Host)
	}
	for _, a := range addrs {
		if !allowPrivate && !IsPublic(a) {
			return nil, fmt.Errorf("%w: %s is %s", ErrPrivateAddress, u.Host, a)
		}
	}
	port := parsed.Port()
	if port == "" {
		port = "443"
		if parsed.Scheme == "http" {
			port = "80"
		}
	}
	ip := addrs[0].Unmap().String()
	if addrs[0].Unmap().Is6() {
		ip = "[" + ip + "]"
	}
	return []string{fmt.Sprintf("http.curloptResolve=%s:%s:%s", parsed.Hostname(), port, ip)}, nil
}

// WithConfig returns a Runner that adds config settings to every command.
func WithConfig(r Runner, config ...string) Runner {
	if len(config) == 0 {
		return r
	}
	return configRunner{r, config}
}

type configRunner struct {
	Runner
	config []string
}

func (c configRunner) Run(ctx context.Context, cmd Cmd) (Result, error) {
	cmd.Config = append(append([]string(nil), c.config...), cmd.Config...)
	return c.Runner.Run(ctx, cmd)
}
