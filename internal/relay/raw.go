package relay

import (
	"bytes"
	"strings"
)

// eventJSON delimits the event object of an EVENT frame that parsed as
// ["EVENT", subID, {…}]: from its first '{' to its last '}'. That is the
// third element exactly when the subscription id holds no '{' (so the
// first '{' opens the event) and only whitespace and the closing ']'
// follow the last '}'. The object must name "id" once: the own relay
// answers OK by the id it reads, and the publisher waits for ours. nil
// when any of this does not hold (the event is then re-encoded).
func eventJSON(frame []byte, subID string) []byte {
	if strings.IndexByte(subID, '{') >= 0 {
		return nil
	}
	i := bytes.IndexByte(frame, '{')
	j := bytes.LastIndexByte(frame, '}')
	if i < 0 || j < i {
		return nil
	}
	tail := bytes.TrimSpace(frame[j+1:])
	if len(tail) != 1 || tail[0] != ']' {
		return nil
	}
	raw := frame[i : j+1]
	if countKey(raw, `"id"`) != 1 {
		return nil
	}
	return raw
}

// countKey counts the places where key (quoted) is followed by optional
// whitespace and a colon: the object keys of that name. Inside a JSON
// string a quote is escaped, so a string value never matches.
func countKey(obj []byte, key string) int {
	n := 0
	for rest := obj; ; {
		k := bytes.Index(rest, []byte(key))
		if k < 0 {
			return n
		}
		rest = rest[k+len(key):]
		after := bytes.TrimLeft(rest, " \t\r\n")
		if len(after) > 0 && after[0] == ':' {
			n++
		}
	}
}

// eventFrame splits an EVENT frame, ["EVENT", "<sub id>", {…}], without
// decoding the event: sub is the subscription id (a JSON string without
// escapes: ours are), obj the event object from its '{' to the frame's
// last '}', followed only by whitespace and the closing ']'. Whether obj
// is exactly one object is the decoder's to say (it refuses trailing
// bytes). ok is false for anything else; the frame then takes the generic
// path.
func eventFrame(data []byte) (sub, obj []byte, ok bool) {
	rest, ok := skipPrefix(data, '[')
	if !ok {
		return nil, nil, false
	}
	rest = trimWS(rest)
	if !bytes.HasPrefix(rest, []byte(`"EVENT"`)) {
		return nil, nil, false
	}
	if rest, ok = skipPrefix(rest[len(`"EVENT"`):], ','); !ok {
		return nil, nil, false
	}
	if rest, ok = skipPrefix(rest, '"'); !ok {
		return nil, nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return nil, nil, false
	}
	sub = rest[:end]
	if rest, ok = skipPrefix(rest[end+1:], ','); !ok {
		return nil, nil, false
	}
	rest = trimWS(rest)
	j := bytes.LastIndexByte(rest, '}')
	if len(rest) == 0 || rest[0] != '{' || j < 0 {
		return nil, nil, false
	}
	if tail := bytes.TrimSpace(rest[j+1:]); len(tail) != 1 || tail[0] != ']' {
		return nil, nil, false
	}
	return sub, rest[:j+1], true
}

// skipPrefix skips whitespace and then c.
func skipPrefix(b []byte, c byte) ([]byte, bool) {
	b = trimWS(b)
	if len(b) == 0 || b[0] != c {
		return nil, false
	}
	return b[1:], true
}

func trimWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
