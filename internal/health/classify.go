package health

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// ClassifyMessage says what a NOTICE text or a CLOSED, OK or NEG-ERR reason
// signals; the rules are the same for every message type. Matching message text is deliberate here: the machine-readable
// prefixes ("rate-limited:", "blocked:", …) are the protocol (NIP-01), and
// relays without them word rate limits in a handful of common ways.
//
// Order of the rules:
//  1. the "rate-limited:" prefix is a rate limit whatever follows;
//  2. complaints about too many subscriptions/REQs are a subscription
//     budget signal, never a rate limit, although they say "too many";
//  3. complaints about too many filters ask for smaller REQs, about too
//     many tag values (or tags) for smaller filters;
//  4. any other NIP-01 prefix ("blocked:", "invalid:", "restricted:", …) is
//     not a rate limit: "blocked: too many query results" is negentropy
//     refusing a large set;
//  5. otherwise "rate limit", "too many", "slow down" and "throttl…"
//     are rate limits.
func ClassifyMessage(text string) Signal {
	t := strings.ToLower(strings.TrimSpace(text))
	prefix := relay.ReasonPrefix(t)
	if prefix == relay.ReasonRateLimited {
		return SignalRateLimited
	}
	if containsAny(t, subscriptionPhrases) {
		return SignalTooManySubscriptions
	}
	if containsAny(t, filterPhrases) {
		return SignalTooManyFilters
	}
	if containsAny(t, tagValuePhrases) {
		return SignalTooManyTagValues
	}
	// "error:" does not count: relays such as strfry prefix every NOTICE
	// with "ERROR:", rate limits included.
	if prefix != "" && prefix != relay.ReasonError {
		return SignalNone
	}
	if containsAny(t, rateLimitPhrases) {
		return SignalRateLimited
	}
	return SignalNone
}

var (
	subscriptionPhrases = []string{
		"too many concurrent req", // strfry: "ERROR: too many concurrent REQs"
		"too many subscriptions",
		"too many concurrent subscriptions",
		"too many open subscriptions",
		"too many active subscriptions",
		"too many reqs",
		"max subscriptions",
		"maximum subscriptions",
		"subscription limit",
		"max_subscriptions",
	}
	filterPhrases = []string{
		"too many filters",
		"arr too big", // strfry: "ERROR: bad req: arr too big" (maxReqFilterSize)
		"max filters",
		"maximum filters",
		"max_filters",
	}
	tagValuePhrases = []string{
		"too many tag values",     // eventstore's SQL backends
		"too many tags in filter", // strfry (tag names); an event with "too many tags" is not this
	}
	rateLimitPhrases = []string{
		"rate limit", "rate-limit", "ratelimit",
		"too many",
		"slow down",
		"throttl",
	}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TeachesLimit tells whether a refusal's text teaches a request bound the
// engine builds smaller requests for (Tracker.Learn): too many filters or
// too many tag values. A request refused so is retried at once, smaller.
func TeachesLimit(text string) bool {
	switch ClassifyMessage(text) {
	case SignalTooManyFilters, SignalTooManyTagValues:
		return true
	}
	return false
}

// RetryDelay is how long a request that failed failures times in a row
// (err the last time) waits before it is asked again: p's delay, with
// jitter, or none the first time a refusal taught a bound (TeachesLimit):
// the retry is built smaller and goes at once; a relay that refuses that
// too backs off.
func RetryDelay(p backoff.Policy, failures int, err error) time.Duration {
	if failures == 1 && err != nil && TeachesLimit(err.Error()) {
		return 0
	}
	return p.Delay(failures, backoff.Rand())
}

// PermanentRefusal tells whether a CLOSED or NEG-ERR reason refuses a read
// for good, until something changes on our side: "restricted:" and
// "blocked:" (but not strfry's negentropy "blocked: too many query
// results", which a smaller request avoids), and "auth-required:" when
// the sidecar has no key to authenticate with (haveKey false).
func PermanentRefusal(reason string, haveKey bool) bool {
	t := strings.ToLower(strings.TrimSpace(reason))
	switch relay.ReasonPrefix(t) {
	case relay.ReasonRestricted:
		return true
	case relay.ReasonBlocked:
		return !strings.Contains(t, "too many")
	case relay.ReasonAuthRequired:
		return !haveKey
	}
	return false
}

// Failure kinds returned by ClassifyError.
type FailureKind int

const (
	// FailureTransient is an ordinary failure: back off and retry.
	FailureTransient FailureKind = iota
	// FailureHard is a failure that retrying soon will not fix; the relay
	// goes on the naughty list for NaughtyPeriod.
	FailureHard
	// FailureRateLimited is a refusal because we were too fast (HTTP 429
	// on the websocket handshake); the relay cools down.
	FailureRateLimited
)

// String names the failure kind.
func (k FailureKind) String() string {
	switch k {
	case FailureTransient:
		return "transient"
	case FailureHard:
		return "hard"
	case FailureRateLimited:
		return "rate_limited"
	}
	return fmt.Sprintf("failure(%d)", int(k))
}

// handshakeStatuser is an error from a websocket handshake answered with
// an HTTP status other than 101, such as *relay.HandshakeError.
type handshakeStatuser interface{ HandshakeStatus() int }

// ClassifyError decides how Failed treats a connection error:
//   - rate limited: a handshake answered 429 Too Many Requests;
//   - transient: a handshake answered 5xx or 408 (a proxy or relay
//     restarting), DNS timeouts and temporary resolver errors, refused or
//     reset connections, timeouts, and anything not listed below;
//   - hard: DNS names that do not exist,
//     TLS certificate and record errors (the peer is not speaking TLS or
//     presents a certificate we do not trust), and any other handshake
//     status (the URL is not a websocket endpoint). net/http reports a
//     plain-HTTP answer to a TLS dial as an untyped error; that one stays
//     transient, since Go error strings are not matched.
func ClassifyError(err error) FailureKind {
	if err == nil {
		return FailureTransient
	}
	var hs handshakeStatuser
	if errors.As(err, &hs) {
		switch code := hs.HandshakeStatus(); {
		case code == http.StatusSwitchingProtocols:
			return FailureTransient
		case code == http.StatusTooManyRequests:
			return FailureRateLimited
		case code == http.StatusRequestTimeout || code >= 500:
			return FailureTransient
		default:
			return FailureHard
		}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound || !(dnsErr.IsTimeout || dnsErr.IsTemporary) {
			return FailureHard
		}
		return FailureTransient
	}
	var (
		certVerify  *tls.CertificateVerificationError
		recordHdr   tls.RecordHeaderError
		unknownAuth x509.UnknownAuthorityError
		hostname    x509.HostnameError
		certInvalid x509.CertificateInvalidError
	)
	if errors.As(err, &certVerify) || errors.As(err, &recordHdr) ||
		errors.As(err, &unknownAuth) || errors.As(err, &hostname) ||
		errors.As(err, &certInvalid) {
		return FailureHard
	}
	return FailureTransient
}
