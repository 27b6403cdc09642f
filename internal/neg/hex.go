package neg

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"
)

// NIP-77 messages travel as hex and reach tens of megabytes when sets differ
// a lot, so encoding and decoding them is a large part of a session's CPU.
// Both directions work on eight digits per 64-bit word (SWAR) and write into
// memory that is not zeroed first, since every byte is written anyway.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// makeNoZero returns a byte slice of length 0 and capacity n whose memory
// is not zeroed: strings.Builder.Grow allocates that way, and the slice
// aliases the builder's buffer, which nothing else ever sees. Callers must
// write every byte they later read (append-style use guarantees it).
func makeNoZero(n int) []byte {
	if n == 0 {
		return nil
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0) // now String's data pointer is the buffer's start
	return unsafe.Slice(unsafe.StringData(sb.String()), n)[:0:n]
}

// encodeHex returns b as a lower-case hex string.
func encodeHex(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	dst := makeNoZero(2 * len(b))[:2*len(b)]
	i := 0
	for ; i+4 <= len(b); i += 4 {
		// Spread four bytes into four 16-bit lanes, split each into its
		// two nibbles (high nibble first in memory), then map 0-9 to '0'-'9'
		// and 10-15 to 'a'-'f'.
		v := uint64(binary.LittleEndian.Uint32(b[i:]))
		v = (v | v<<16) & 0x0000ffff0000ffff
		v = (v | v<<8) & 0x00ff00ff00ff00ff
		n := (v>>4)&0x000f000f000f000f | (v&0x000f000f000f000f)<<8
		letters := ((n + 6*ones) >> 4) & ones
		binary.LittleEndian.PutUint64(dst[2*i:], n+0x30*ones+letters*('a'-'0'-10))
	}
	for ; i < len(b); i++ {
		p := hexPairs[b[i]]
		dst[2*i], dst[2*i+1] = p[0], p[1]
	}
	return unsafe.String(&dst[0], len(dst))
}

var hexPairs [256][2]byte // byte -> two lower-case hex digits

func init() {
	const digits = "0123456789abcdef"
	for i := range hexPairs {
		hexPairs[i] = [2]byte{digits[i>>4], digits[i&0xf]}
	}
}

// decodeHex decodes s (either case); an odd length or a non-hex character is
// an error.
func decodeHex(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("odd hex length %d", len(s))
	}
	dst := makeNoZero(len(s) / 2)[:len(s)/2]
	src := unsafe.Slice(unsafe.StringData(s), len(s))
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		x := binary.LittleEndian.Uint64(src[2*i:])
		if !validHex8(x) {
			return nil, badHex(s)
		}
		// Nibble values: digits are c&0xf, letters (either case) c&0xf + 9.
		letters := (x >> 6) & ones
		n := x&(0x0f*ones) + letters*9
		// Lane k (16 bits) holds digits 2k (high nibble) and 2k+1.
		v := (n&0x000f000f000f000f)<<4 | (n>>8)&0x000f000f000f000f
		v = (v | v>>8) & 0x0000ffff0000ffff
		v = (v | v>>16) & 0xffffffff
		binary.LittleEndian.PutUint32(dst[i:], uint32(v))
	}
	for ; i < len(dst); i++ {
		hi, ok1 := hexDigit(s[2*i])
		lo, ok2 := hexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return nil, badHex(s)
		}
		dst[i] = hi<<4 | lo
	}
	return dst, nil
}

// validHex8 reports whether all eight bytes of x are hex digits.
func validHex8(x uint64) bool {
	if x&highs != 0 {
		return false
	}
	// With the high bits clear, adding 0x80-k sets a byte's high bit
	// exactly when the byte is >= k, without carries between bytes.
	ge := func(v uint64, k uint64) uint64 { return v + (0x80-k)*ones }
	digit := ge(x, '0') &^ ge(x, '9'+1)
	l := x | 0x20*ones // fold upper case onto lower case
	letter := ge(l, 'a') &^ ge(l, 'f'+1)
	return (digit|letter)&highs == highs
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func badHex(s string) error {
	for j := 0; j < len(s); j++ {
		if _, ok := hexDigit(s[j]); !ok {
			return fmt.Errorf("non-hex character at offset %d", j)
		}
	}
	return fmt.Errorf("invalid hex")
}
