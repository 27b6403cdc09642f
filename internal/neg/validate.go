package neg

import (
	"fmt"
	"math"
	"strings"

	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
)

const (
	// ProtocolVersion is the NIP-77 protocol version byte (version 1).
	ProtocolVersion = 0x61

	maxVarintBytes = 9 // 63 bits: every accepted value fits an int64
	maxBoundIDLen  = 32
	idSize         = 32
)

// ValidateMessage checks a NIP-77 message received from a relay before it
// reaches a protocol engine. It requires an even number of hex characters
// (at most maxHex, if maxHex > 0), the protocol version byte, and a
// well-formed sequence of ranges: bounded varints, timestamps that do not
// overflow, bound id prefixes of at most 32 bytes, known modes, and id
// lists that fit in the message. It returns the message in lower case, the
// form go-nostr's engine compares fingerprints and ids in. Errors wrap
// ErrInvalidMessage.
func ValidateMessage(msg string, maxHex int) (string, error) {
	if _, err := DecodeMessage(msg, maxHex); err != nil {
		return "", err
	}
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c >= 'A' && c <= 'F' {
			return strings.ToLower(msg), nil
		}
	}
	return msg, nil
}

// DecodeMessage checks a hex NIP-77 message as ValidateMessage does and
// returns it decoded.
func DecodeMessage(msg string, maxHex int) ([]byte, error) {
	if maxHex > 0 && len(msg) > maxHex {
		return nil, fmt.Errorf("%w: %d hex characters, limit %d", ErrInvalidMessage, len(msg), maxHex)
	}
	if len(msg) < 2 || len(msg)%2 != 0 {
		return nil, fmt.Errorf("%w: odd or empty hex length %d", ErrInvalidMessage, len(msg))
	}
	b, err := decodeHex(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err := walkMessage(b); err != nil {
		return nil, err
	}
	return b, nil
}

// walkMessage checks the binary structure of a NIP-77 message.
func walkMessage(b []byte) error {
	if b[0] != ProtocolVersion {
		return fmt.Errorf("%w: protocol version 0x%02x, want 0x%02x", ErrInvalidMessage, b[0], ProtocolVersion)
	}
	r := byteReader{b: b, pos: 1}
	var last uint64 // previous timestamp; deltas accumulate within a message
	for r.pos < len(r.b) {
		start := r.pos
		// Bound: timestamp (0 = infinity, else delta+1), id prefix length, id prefix.
		ts, err := r.varint()
		if err != nil {
			return fmt.Errorf("%w: bound timestamp at offset %d: %w", ErrInvalidMessage, start, err)
		}
		if ts == 0 {
			last = math.MaxInt64
		} else {
			delta := ts - 1
			if delta > math.MaxInt64-last {
				return fmt.Errorf("%w: bound timestamp overflows at offset %d", ErrInvalidMessage, start)
			}
			last += delta
		}
		l, err := r.varint()
		if err != nil {
			return fmt.Errorf("%w: bound length at offset %d: %w", ErrInvalidMessage, start, err)
		}
		if l > maxBoundIDLen {
			return fmt.Errorf("%w: bound id length %d over %d at offset %d", ErrInvalidMessage, l, maxBoundIDLen, start)
		}
		if err := r.skip(int(l)); err != nil {
			return fmt.Errorf("%w: bound id at offset %d: %w", ErrInvalidMessage, start, err)
		}
		mode, err := r.varint()
		if err != nil {
			return fmt.Errorf("%w: mode at offset %d: %w", ErrInvalidMessage, start, err)
		}
		if mode > uint64(negentropy.IdListMode) { // checked first: Mode is a uint8 and 256 would wrap to skip
			return fmt.Errorf("%w: unknown mode %d at offset %d", ErrInvalidMessage, mode, start)
		}
		switch negentropy.Mode(mode) {
		case negentropy.SkipMode:
		case negentropy.FingerprintMode:
			if err := r.skip(negentropy.FingerprintSize); err != nil {
				return fmt.Errorf("%w: fingerprint at offset %d: %w", ErrInvalidMessage, start, err)
			}
		case negentropy.IdListMode:
			n, err := r.varint()
			if err != nil {
				return fmt.Errorf("%w: id count at offset %d: %w", ErrInvalidMessage, start, err)
			}
			if n > uint64(len(r.b)-r.pos)/idSize {
				return fmt.Errorf("%w: %d ids do not fit in the message at offset %d", ErrInvalidMessage, n, start)
			}
			r.pos += int(n) * idSize
		}
	}
	return nil
}

type byteReader struct {
	b   []byte
	pos int
}

var (
	errTruncated   = fmt.Errorf("truncated")
	errVarintRange = fmt.Errorf("varint longer than %d bytes", maxVarintBytes)
)

func (r *byteReader) varint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		if i == maxVarintBytes {
			return 0, errVarintRange
		}
		if r.pos >= len(r.b) {
			return 0, errTruncated
		}
		c := r.b[r.pos]
		r.pos++
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

func (r *byteReader) skip(n int) error {
	if n > len(r.b)-r.pos {
		return errTruncated
	}
	r.pos += n
	return nil
}
