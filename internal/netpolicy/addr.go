package netpolicy

import (
	"net/netip"
)

// Reasons a destination is refused. They are the values of the reason
// label of ngit_sync_dial_refused_total, so the set is closed.
const (
	ReasonScheme      = "scheme"      // scheme not allowed for the kind of URL
	ReasonURL         = "url"         // malformed URL, credentials, control characters, leading '-'
	ReasonLoopback    = "loopback"    // 127.0.0.0/8, ::1, the name localhost
	ReasonPrivate     = "private"     // RFC 1918, fc00::/7
	ReasonLinkLocal   = "link_local"  // 169.254.0.0/16, fe80::/10
	ReasonMetadata    = "metadata"    // cloud metadata endpoints
	ReasonMulticast   = "multicast"   // 224.0.0.0/4, ff00::/8
	ReasonUnspecified = "unspecified" // 0.0.0.0/8, ::
	ReasonReserved    = "reserved"    // CGNAT, documentation, benchmarking, 240/4, …
	ReasonResolve     = "resolve"     // the host name did not resolve
)

// metadata are cloud instance-metadata endpoints. They are checked before
// the broader ranges they sit in, so the reason names them.
var metadata = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.254/32"), // AWS, GCP, Azure, OpenStack, DigitalOcean
	netip.MustParsePrefix("169.254.170.2/32"),   // AWS ECS task metadata
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS over IPv6
}

// reserved are ranges that are neither private nor globally routable
// unicast, and that a public relay or git host never lives in.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and 255.255.255.255
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/32"),       // Teredo (tunnels to arbitrary IPv4)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
}

// Translated IPv6 ranges that embed an IPv4 address; the embedded address
// is classified as well, so 64:ff9b::a00:1 is as private as 10.0.0.1.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Classify tells why an address must not be reached from an announcement,
// or "" when it is a globally routable unicast address. IPv4-mapped IPv6
// addresses are classified as their IPv4 address.
func Classify(a netip.Addr) string {
	if !a.IsValid() {
		return ReasonUnspecified
	}
	a = a.Unmap()
	a = a.WithZone("")
	for _, p := range metadata {
		if p.Contains(a) {
			return ReasonMetadata
		}
	}
	switch {
	case a.IsUnspecified():
		return ReasonUnspecified
	case a.Is4() && a.As4()[0] == 0:
		return ReasonUnspecified // 0.0.0.0/8, "this network"
	case a.IsLoopback():
		return ReasonLoopback
	case a.IsPrivate():
		return ReasonPrivate
	case a.IsLinkLocalUnicast():
		return ReasonLinkLocal
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return ReasonMulticast
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return ReasonReserved
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case nat64.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if v4.IsValid() {
			return Classify(v4)
		}
	}
	return ""
}
