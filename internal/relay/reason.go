package relay

import (
	"errors"
	"strings"
)

// ErrAuthRequired: the relay answered a request "auth-required: …"
// (NIP-42) — a REQ's CLOSED, a NEG-ERR — or the authentication it asked for
// could not be done (no key, refused, unanswered). REQ and NEG-OPEN errors
// of that kind wrap it.
var ErrAuthRequired = errors.New("relay requires NIP-42 authentication")

// The machine-readable prefixes of NIP-01 OK and CLOSED reasons (also used
// in NIP-77 NEG-ERR reasons), without their colon.
const (
	ReasonDuplicate    = "duplicate"
	ReasonPoW          = "pow"
	ReasonBlocked      = "blocked"
	ReasonRateLimited  = "rate-limited"
	ReasonInvalid      = "invalid"
	ReasonRestricted   = "restricted"
	ReasonMute         = "mute"
	ReasonError        = "error"
	ReasonAuthRequired = "auth-required"
	// ReasonPurgatory is GRASP-01's OK true "purgatory: …": accepted, not
	// served until the event's git data arrives (discarded after 30 min
	// without it).
	ReasonPurgatory = "purgatory"
)

// ReasonPrefix returns the machine-readable NIP-01 prefix of reason (one of
// the Reason constants: "blocked" for "blocked: too many query results"),
// or "" when reason does not start with one followed by a colon. Matching
// is exact: callers lower-case the reason first where relays vary.
func ReasonPrefix(reason string) string {
	prefix, _, ok := strings.Cut(reason, ":")
	if !ok {
		return ""
	}
	switch prefix {
	case ReasonDuplicate, ReasonPoW, ReasonBlocked, ReasonRateLimited, ReasonInvalid,
		ReasonRestricted, ReasonMute, ReasonError, ReasonAuthRequired, ReasonPurgatory:
		return prefix
	}
	return ""
}
