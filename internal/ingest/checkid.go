package ingest

import (
	"crypto/sha256"
	"strconv"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// The id check stays on arrival: the flights tell copies of an id apart by
// their signature, and a copy with a real id and signature but other
// content would, unchecked, be sent as the id's first copy and make the
// real one a duplicate while it is in flight; the RejectedIndex and the
// purgatory rely on it too (verifySig checks the signature only). It is
// made cheaper instead: checkID is nostr.Event.CheckID with the NIP-01
// serialization written into a pooled buffer and strings escaped by runs
// (go-nostr appends byte by byte into a buffer allocated per event).

var serBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledSer bounds the buffers kept for reuse.
const maxPooledSer = 64 << 10

// checkID tells whether ev.ID is the lowercase hex sha256 of ev's NIP-01
// serialization (nostr.Event.CheckID).
func checkID(ev *nostr.Event) bool {
	if len(ev.ID) != 64 {
		return false
	}
	bp := serBufs.Get().(*[]byte)
	ser := serializeEvent((*bp)[:0], ev)
	h := sha256.Sum256(ser)
	if cap(ser) <= maxPooledSer {
		*bp = ser
		serBufs.Put(bp)
	}
	const hextable = "0123456789abcdef"
	for i, b := range h {
		if ev.ID[2*i] != hextable[b>>4] || ev.ID[2*i+1] != hextable[b&0x0f] {
			return false
		}
	}
	return true
}

// serializeEvent appends ev's NIP-01 serialization, byte for byte what
// nostr.Event.Serialize returns (the pubkey unescaped, as there).
func serializeEvent(dst []byte, ev *nostr.Event) []byte {
	dst = append(dst, `[0,"`...)
	dst = append(dst, ev.PubKey...)
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, int64(ev.CreatedAt), 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, ",["...)
	for i, tag := range ev.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, s := range tag {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendEscaped(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, "],"...)
	dst = appendEscaped(dst, ev.Content)
	return append(dst, ']')
}

// plainByte tells the bytes a JSON string carries as they are.
var plainByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// appendEscaped appends s as a JSON string the way go-nostr's
// serialization escapes it: quote, backslash and control characters; the
// runs between them are copied whole.
func appendEscaped(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == 0x08:
			dst = append(dst, '\\', 'b')
		case c < 0x09:
			dst = append(dst, '\\', 'u', '0', '0', '0', '0'+c)
		case c == 0x09:
			dst = append(dst, '\\', 't')
		case c == 0x0a:
			dst = append(dst, '\\', 'n')
		case c == 0x0c:
			dst = append(dst, '\\', 'f')
		case c == 0x0d:
			dst = append(dst, '\\', 'r')
		case c < 0x10:
			dst = append(dst, '\\', 'u', '0', '0', '0', 0x57+c)
		case c < 0x1a:
			dst = append(dst, '\\', 'u', '0', '0', '1', 0x20+c)
		default:
			dst = append(dst, '\\', 'u', '0', '0', '1', 0x47+c)
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
