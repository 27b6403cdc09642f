package event

import "github.com/nbd-wtf/go-nostr"

// ID is an event id (or a pubkey) in binary: the 32 bytes its 64 hex
// characters encode.
type ID [32]byte

// DecodeID decodes a 64-character lower-case hex string (the canonical
// form of event ids and pubkeys; upper case is refused) in one pass. It is
// the one id decoder of the dedupe set, the indexes and the fetch claims.
func DecodeID(s string) (ID, bool) {
	var k ID
	if len(s) != 64 {
		return k, false
	}
	for i := range k {
		hi, lo := hexNibble[s[2*i]], hexNibble[s[2*i+1]]
		if hi|lo > 0x0f {
			return k, false
		}
		k[i] = hi<<4 | lo
	}
	return k, true
}

// IDOf decodes ev's id (DecodeID); false when it is not 64 lower-case hex
// characters.
func IDOf(ev *nostr.Event) (ID, bool) { return DecodeID(ev.ID) }

// hexNibble maps '0'–'9' and 'a'–'f' to their values, anything else to 0xff.
var hexNibble = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendHex appends id as 64 lower-case hex characters to dst.
func (id *ID) AppendHex(dst []byte) []byte {
	for _, b := range id {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return dst
}

// String returns id as 64 lower-case hex characters (the form DecodeID
// reads).
func (id ID) String() string {
	var b [64]byte
	return string(id.AppendHex(b[:0]))
}
