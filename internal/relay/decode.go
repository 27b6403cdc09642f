package relay

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
)

// eventDecoder decodes the event objects of EVENT frames as go-nostr's
// Event.UnmarshalJSON does, faster for the shape relays send: the seven
// fields once each, strings unescaped in one pass, and tags of strings,
// each tag and the tag list allocated at its size. Anything else (a field
// twice or unknown, a null, a number that is not a plain integer) makes
// decode return false, and the caller decodes the object with go-nostr:
// what an event means does not depend on which decoder read it. Each string is its own allocation, as
// go-nostr makes them, so what a caller keeps of an event keeps nothing
// else alive. One decoder per read loop: its scratch space is reused.
type eventDecoder struct {
	vals []string // the current tag's values
	tags []nostr.Tag
	buf  []byte // unescaping
}

// field bits, to refuse a field named twice
const (
	fID = 1 << iota
	fPubKey
	fCreatedAt
	fKind
	fTags
	fContent
	fSig
)

// decode fills ev (zero) from obj, or returns false with ev in any state.
func (d *eventDecoder) decode(obj []byte, ev *nostr.Event) bool {
	rest, ok := skipPrefix(obj, '{')
	if !ok {
		return false
	}
	rest = trimWS(rest)
	if len(rest) > 0 && rest[0] == '}' {
		return len(trimWS(rest[1:])) == 0
	}
	seen := 0
	for {
		var key []byte
		if key, rest, ok = plainString(rest); !ok {
			return false
		}
		if rest, ok = skipPrefix(rest, ':'); !ok {
			return false
		}
		rest = trimWS(rest)
		var bit int
		switch string(key) {
		case "id":
			bit = fID
			ev.ID, rest, ok = d.str(rest)
		case "pubkey":
			bit = fPubKey
			ev.PubKey, rest, ok = d.str(rest)
		case "sig":
			bit = fSig
			ev.Sig, rest, ok = d.str(rest)
		case "content":
			bit = fContent
			ev.Content, rest, ok = d.str(rest)
		case "kind":
			bit = fKind
			var n int64
			n, rest, ok = plainInt(rest)
			ev.Kind = int(n)
		case "created_at":
			bit = fCreatedAt
			var n int64
			n, rest, ok = plainInt(rest)
			ev.CreatedAt = nostr.Timestamp(n)
		case "tags":
			bit = fTags
			ev.Tags, rest, ok = d.tagList(rest)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		rest = trimWS(rest)
		if len(rest) == 0 {
			return false
		}
		switch rest[0] {
		case ',':
			rest = trimWS(rest[1:])
			continue
		case '}':
			return len(trimWS(rest[1:])) == 0
		}
		return false
	}
}

// tagList reads [[…], …]: the list and every tag at its exact size, an
// empty list and empty tags empty but not nil (as go-nostr makes them).
func (d *eventDecoder) tagList(b []byte) (nostr.Tags, []byte, bool) {
	rest, ok := skipPrefix(b, '[')
	if !ok {
		return nil, nil, false
	}
	rest = trimWS(rest)
	if len(rest) > 0 && rest[0] == ']' {
		return nostr.Tags{}, rest[1:], true
	}
	d.tags = d.tags[:0]
	defer func() { clear(d.tags) }()
	for {
		var tag nostr.Tag
		if tag, rest, ok = d.tag(rest); !ok {
			return nil, nil, false
		}
		d.tags = append(d.tags, tag)
		rest = trimWS(rest)
		if len(rest) == 0 {
			return nil, nil, false
		}
		switch rest[0] {
		case ',':
			rest = trimWS(rest[1:])
			continue
		case ']':
			return append(make(nostr.Tags, 0, len(d.tags)), d.tags...), rest[1:], true
		}
		return nil, nil, false
	}
}

// tag reads one tag, ["…", …].
func (d *eventDecoder) tag(b []byte) (nostr.Tag, []byte, bool) {
	rest, ok := skipPrefix(b, '[')
	if !ok {
		return nil, nil, false
	}
	rest = trimWS(rest)
	if len(rest) > 0 && rest[0] == ']' {
		return nostr.Tag{}, rest[1:], true
	}
	d.vals = d.vals[:0]
	defer func() { clear(d.vals) }()
	for {
		var s string
		if s, rest, ok = d.str(rest); !ok {
			return nil, nil, false
		}
		d.vals = append(d.vals, s)
		rest = trimWS(rest)
		if len(rest) == 0 {
			return nil, nil, false
		}
		switch rest[0] {
		case ',':
			rest = trimWS(rest[1:])
			continue
		case ']':
			return append(make(nostr.Tag, 0, len(d.vals)), d.vals...), rest[1:], true
		}
		return nil, nil, false
	}
}

// str reads a JSON string at the start of b (no whitespace before it).
// Escapes are decoded as go-nostr's decoder (easyjson) decodes them.
func (d *eventDecoder) str(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	b = b[1:]
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return "", nil, false
	}
	esc := bytes.IndexByte(b[:end], '\\')
	if esc < 0 {
		return string(b[:end]), b[end+1:], true
	}
	// Escapes: the string ends at the first quote not escaped.
	out := append(d.buf[:0], b[:esc]...)
	i := esc
	for {
		if i >= len(b) {
			return "", nil, false
		}
		c := b[i]
		if c == '"' {
			break
		}
		if c != '\\' {
			j := i + 1
			for j < len(b) && b[j] != '"' && b[j] != '\\' {
				j++
			}
			out = append(out, b[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(b) {
			return "", nil, false
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			// As easyjson: a surrogate pair is one rune, a lone
			// surrogate U+FFFD.
			r := getu4(b[i:])
			if r < 0 {
				return "", nil, false
			}
			read := 6
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, getu4(b[i+6:])); dec != unicode.ReplacementChar {
					read += 6
					r = dec
				} else {
					r = unicode.ReplacementChar
				}
			}
			out = utf8.AppendRune(out, r)
			i += read
			continue
		default:
			return "", nil, false
		}
		i += 2
	}
	if cap(out) <= maxKeptReadBuffer {
		d.buf = out
	}
	return string(out), b[i+1:], true
}

// getu4 decodes \uXXXX at the start of s, or returns -1 (easyjson's).
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var val rune
	for _, c := range s[2:6] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return -1
		}
		val = val<<4 | rune(v)
	}
	return val
}

// plainInt reads -?[0-9]+ (no leading zero, at most 18 digits): what
// go-nostr's decoder reads the same way. Anything else is for it to judge.
func plainInt(b []byte) (int64, []byte, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || (digits > 1 && b[start] == '0') {
		return 0, nil, false
	}
	if i < len(b) {
		switch b[i] {
		case '.', 'e', 'E', '+', '-':
			return 0, nil, false
		}
	}
	n, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return n, b[i:], true
}
