package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/nbd-wtf/go-nostr"
)

// Redacted is what a SecretKey prints instead of its value.
const Redacted = "[redacted]"

// ErrInvalidKey is returned for a secret key that is neither nsec1… nor
// 64 hex characters. Its message never contains the key.
var ErrInvalidKey = errors.New("secret key must be nsec1… or 64 hex characters")

// SecretKey is a Nostr secret key. Every way of printing or serialising it
// (fmt verbs, String, GoString, JSON, YAML, text) yields "[redacted]"; only
// Hex returns the key itself.
type SecretKey struct {
	hex string
}

// ParseSecretKey accepts an nsec1… bech32 string or 64 hex characters,
// surrounding white space ignored.
func ParseSecretKey(s string) (SecretKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "nsec1") {
		prefix, v, err := nip19.Decode(s)
		sk, ok := v.(string)
		if err != nil || prefix != "nsec" || !ok {
			return SecretKey{}, ErrInvalidKey
		}
		s = sk
	}
	if len(s) != 64 {
		return SecretKey{}, ErrInvalidKey
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return SecretKey{}, ErrInvalidKey
	}
	allZero := true
	for _, c := range b {
		if c != 0 {
			allZero = false
			break
		}
	}
	if allZero {
		return SecretKey{}, ErrInvalidKey
	}
	return SecretKey{hex: strings.ToLower(s)}, nil
}

// Hex returns the key as 64 lower-case hex characters, or "" when unset.
// Do not log the result.
func (k SecretKey) Hex() string { return k.hex }

// Sign signs ev with the key (the signer of NIP-42 AUTH events).
func (k SecretKey) Sign(ev *nostr.Event) error { return ev.Sign(k.hex) }

// IsZero reports whether no key is loaded.
func (k SecretKey) IsZero() bool { return k.hex == "" }

// PublicKey returns the hex public key of k.
func (k SecretKey) PublicKey() (string, error) {
	if k.hex == "" {
		return "", ErrInvalidKey
	}
	pk, err := nostr.GetPublicKey(k.hex)
	if err != nil {
		return "", fmt.Errorf("derive public key: %w", ErrInvalidKey)
	}
	return pk, nil
}

func (k SecretKey) redacted() string {
	if k.hex == "" {
		return ""
	}
	return Redacted
}

// String implements fmt.Stringer.
func (k SecretKey) String() string { return k.redacted() }

// GoString implements fmt.GoStringer.
func (k SecretKey) GoString() string { return `config.SecretKey("` + k.redacted() + `")` }

// Format implements fmt.Formatter so that every verb is redacted.
func (k SecretKey) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(k.GoString()))
		return
	}
	_, _ = f.Write([]byte(k.redacted()))
}

// MarshalJSON implements json.Marshaler.
func (k SecretKey) MarshalJSON() ([]byte, error) {
	return []byte(`"` + k.redacted() + `"`), nil
}

// MarshalText implements encoding.TextMarshaler.
func (k SecretKey) MarshalText() ([]byte, error) { return []byte(k.redacted()), nil }

// MarshalYAML implements yaml.Marshaler.
func (k SecretKey) MarshalYAML() (any, error) { return k.redacted(), nil }
