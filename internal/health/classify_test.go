package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

func TestClassifyMessage(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Signal
	}{
		// NIP-01 prefix: a rate limit whatever the wording.
		{"rate-limited: slow down", SignalRateLimited},
		{"rate-limited:", SignalRateLimited},
		{"RATE-LIMITED: you are noisy", SignalRateLimited},
		{"  rate-limited: leading space", SignalRateLimited},
		// Common wordings without the prefix.
		{"you are being throttled", SignalRateLimited},
		{"Throttling: wait a bit", SignalRateLimited},
		{"rate limit exceeded", SignalRateLimited},
		{"error: ratelimit reached", SignalRateLimited},
		{"Too many requests, try later", SignalRateLimited},
		{"slow down!", SignalRateLimited},
		{"ERROR: too many messages", SignalRateLimited},
		// Subscription budget: contains "too many" but is not a rate limit.
		{"ERROR: too many concurrent REQs", SignalTooManySubscriptions},
		{"too many subscriptions", SignalTooManySubscriptions},
		{"error: too many open subscriptions (max 10)", SignalTooManySubscriptions},
		{"restricted: max subscriptions reached", SignalTooManySubscriptions},
		{"rate-limited: too many concurrent REQs", SignalRateLimited}, // the prefix is the protocol
		// Filter count.
		{"ERROR: too many filters", SignalTooManyFilters},
		{"ERROR: bad req: arr too big", SignalTooManyFilters}, // strfry over maxReqFilterSize
		{"invalid: max_filters exceeded", SignalTooManyFilters},
		// Other NIP-01 prefixes are never rate limits.
		{"blocked: too many query results", SignalNone},
		{"blocked: you are banned", SignalNone},
		{"invalid: too many tags", SignalNone}, // an event refused, not a filter
		{"error: too many tag values", SignalTooManyTagValues},
		{"ERROR: bad req: too many tags in filter", SignalTooManyTagValues},
		{"restricted: slow down is not for you", SignalNone},
		{"duplicate: already have this event", SignalNone},
		{"auth-required: please authenticate", SignalNone},
		{"pow: difficulty 20 required", SignalNone},
		// Nothing relevant.
		{"", SignalNone},
		{"ERROR: bad msg: unparseable", SignalNone},
		{"could not parse filter", SignalNone},
		{"PROTOCOL-ERROR", SignalNone},
	} {
		t.Run(tc.text, func(t *testing.T) {
			if got := ClassifyMessage(tc.text); got != tc.want {
				t.Fatalf("ClassifyMessage(%q) = %s, want %s", tc.text, got, tc.want)
			}
		})
	}
}

// statusErr is a foreign error type exposing the handshake status, as the
// relay package's errors may.
type statusErr int

func (e statusErr) Error() string        { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusErr) HandshakeStatus() int { return int(e) }

func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want FailureKind
	}{
		{"nil", nil, FailureTransient},
		{"plain", errors.New("boom"), FailureTransient},
		{"eof", io.ErrUnexpectedEOF, FailureTransient},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, FailureTransient},
		{"deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), FailureTransient},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, FailureHard},
		{"dns wrapped", fmt.Errorf("dial wss://x.invalid: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}), FailureHard},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, FailureTransient},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", IsTemporary: true}, FailureTransient},
		{"dns other", &net.DNSError{Err: "no answer"}, FailureHard},
		{"x509 unknown authority", fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), FailureHard},
		{"x509 hostname", x509.HostnameError{Host: "a"}, FailureHard},
		{"x509 invalid", x509.CertificateInvalidError{Reason: x509.Expired}, FailureHard},
		{"tls verification", &tls.CertificateVerificationError{Err: errors.New("bad")}, FailureHard},
		{"tls record header", fmt.Errorf("handshake: %w", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), FailureHard},
		{"handshake 200", &relay.HandshakeError{StatusCode: 200}, FailureHard},
		{"handshake 404", fmt.Errorf("dial: %w", &relay.HandshakeError{StatusCode: 404}), FailureHard},
		{"handshake 403", &relay.HandshakeError{StatusCode: 403}, FailureHard},
		{"handshake 429", &relay.HandshakeError{StatusCode: 429}, FailureRateLimited},
		{"handshake 408", &relay.HandshakeError{StatusCode: 408}, FailureTransient},
		{"handshake 502", &relay.HandshakeError{StatusCode: 502}, FailureTransient},
		{"handshake 503 foreign type", fmt.Errorf("dial: %w", statusErr(503)), FailureTransient},
		{"handshake 400 foreign type", statusErr(400), FailureHard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyError(tc.err); got != tc.want {
				t.Fatalf("ClassifyError(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// TestTeachesLimit: only refusals for a request's filter count or tag
// values teach a bound; a rate limit or any other refusal does not.
func TestTeachesLimit(t *testing.T) {
	for text, want := range map[string]bool{
		"invalid: too many filters in REQ":     true,
		"error: too many tag values":           true,
		"rate-limited: slow down":              false,
		"restricted: not allowed":              false,
		"blocked: too many query results":      false,
		"error: too many concurrent REQs":      false,
		"auth-required: authentication needed": false,
	} {
		if got := TeachesLimit(text); got != want {
			t.Errorf("TeachesLimit(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestRetryDelay: the first failure whose refusal taught a bound retries
// at once; a second one, or any other failure, waits the policy's delay.
func TestRetryDelay(t *testing.T) {
	p := backoff.Policy{Base: time.Second, Max: time.Minute}
	limit := errors.New("relay closed the subscription: invalid: too many filters in REQ")
	if d := RetryDelay(p, 1, limit); d != 0 {
		t.Errorf("first refusal that taught a bound: %s, want 0", d)
	}
	if d := RetryDelay(p, 2, limit); d <= 0 {
		t.Errorf("second refusal that taught a bound: %s, want a backoff", d)
	}
	if d := RetryDelay(p, 1, errors.New("EOSE timeout")); d <= 0 {
		t.Errorf("another failure: %s, want a backoff", d)
	}
}
