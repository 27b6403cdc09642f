package neg

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

const (
	// ProtocolVersion is the NIP-77 protocol version byte (version 1).
	ProtocolVersion = 0x61

	maxVarintBytes = 9 // 63 bits: every accepted value fits an int64
	idSize         = 32
)

var (
	errTruncated   = fmt.Errorf("truncated")
	errVarintRange = fmt.Errorf("varint longer than %d bytes", maxVarintBytes)
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
	encodeInto(dst, b)
	return unsafe.String(&dst[0], len(dst))
}

// encodeInto writes b as lower-case hex into dst[:2*len(b)].
func encodeInto(dst, b []byte) {
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
	if !decodeInto(dst, s) {
		return nil, badHex(s)
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

// decodeInto decodes the first 2*len(dst) characters of src into dst and
// reports whether they were all hex digits.
func decodeInto(dst []byte, src string) bool {
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		x := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(src[2*i:]), 8))
		if !validHex8(x) {
			return false
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
		hi, ok1 := hexDigit(src[2*i])
		lo, ok2 := hexDigit(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexReader reads a hex NIP-77 message in binary units, decoding as it
// goes. Every error wraps ErrInvalidMessage.
type hexReader struct {
	s   string
	pos int // in characters; always even
}

// left is the number of bytes (character pairs) not read yet.
func (r *hexReader) left() int { return (len(r.s) - r.pos) / 2 }

func (r *hexReader) byte() (byte, error) {
	var b [1]byte
	err := r.read(b[:])
	return b[0], err
}

// read decodes len(dst) bytes.
func (r *hexReader) read(dst []byte) error {
	if len(dst) > r.left() {
		return fmt.Errorf("%w: %w: %d bytes wanted at offset %d, %d left", ErrInvalidMessage, errTruncated, len(dst), r.pos/2, r.left())
	}
	if !decodeInto(dst, r.s[r.pos:]) {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, badHex(r.s[r.pos:r.pos+2*len(dst)]))
	}
	r.pos += 2 * len(dst)
	return nil
}

// skip passes over n bytes, checking that they are hex.
func (r *hexReader) skip(n int) error {
	if n > r.left() {
		return fmt.Errorf("%w: %w: %d bytes to skip at offset %d, %d left", ErrInvalidMessage, errTruncated, n, r.pos/2, r.left())
	}
	span := r.s[r.pos : r.pos+2*n]
	i := 0
	for ; i+8 <= len(span); i += 8 {
		if !validHex8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(span[i:]), 8))) {
			return fmt.Errorf("%w: %w", ErrInvalidMessage, badHex(span))
		}
	}
	for ; i < len(span); i++ {
		if _, ok := hexDigit(span[i]); !ok {
			return fmt.Errorf("%w: %w", ErrInvalidMessage, badHex(span))
		}
	}
	r.pos += 2 * n
	return nil
}

// varint reads a NIP-77 varint of at most 63 bits.
func (r *hexReader) varint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		if i == maxVarintBytes {
			return 0, fmt.Errorf("%w: %w", ErrInvalidMessage, errVarintRange)
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

// hexWriter builds a hex NIP-77 message; sizes are counted in bytes.
// most, when set, is the most characters growing reserves at once (a
// frame limit's answer is cut to it).
type hexWriter struct {
	b    []byte
	most int
}

func (w *hexWriter) len() int          { return len(w.b) }
func (w *hexWriter) size() int         { return len(w.b) / 2 }
func (w *hexWriter) truncate(mark int) { w.b = w.b[:mark] }

// reserve makes room for n more characters (Go alone would grow large
// slices by only 1.25×).
func (w *hexWriter) reserve(n int) {
	if cap(w.b)-len(w.b) >= n {
		return
	}
	// Grow fourfold: a client's id lists can be twenty times the message
	// they answer, and every step copies what was written so far.
	grown := 4 * cap(w.b)
	if w.most > 0 {
		grown = min(grown, w.most)
	}
	w.b = append(makeNoZero(max(grown, len(w.b)+n)), w.b...)
}

func (w *hexWriter) byte(c byte) {
	p := hexPairs[c]
	w.b = append(w.b, p[0], p[1])
}

func (w *hexWriter) varint(n uint64) {
	var tmp [10]byte
	for _, c := range tmp[:putVarint(tmp[:], n)] {
		w.byte(c)
	}
}

func (w *hexWriter) bytes(p []byte) {
	w.reserve(2 * len(p))
	n := len(w.b)
	w.b = w.b[:n+2*len(p)]
	encodeInto(w.b[n:], p)
}

func (w *hexWriter) id(id *event.ID) { w.bytes(id[:]) }

// String returns the message; the writer must not be used afterwards.
func (w *hexWriter) String() string {
	if len(w.b) == 0 {
		return ""
	}
	if cap(w.b)-len(w.b) > 1<<20 && cap(w.b) > 4*len(w.b) {
		// Most of the reserved room went unused: do not keep it alive for
		// as long as the message is.
		return string(w.b)
	}
	return unsafe.String(&w.b[0], len(w.b))
}
