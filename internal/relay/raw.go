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
