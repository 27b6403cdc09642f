package relay

import "bytes"

// The frames a sync receives by the thousand besides EVENT (the own
// relay's OK for every event published, NEG-MSG pages up to 1 MiB) are
// split by hand straight from the read buffer when they have the shape
// relays send: no copy of the frame, no generic JSON parse. Anything else
// (escapes in a string, other value types, fields after the last) takes
// go-nostr's decoder as before, so what a frame means does not change.

// okFrame splits ["OK","<id>",true|false,"<reason>"] whose strings hold
// no escapes; fine is false for anything else.
func okFrame(data []byte) (id []byte, ok bool, reason []byte, fine bool) {
	rest, fine := frameStart(data, `"OK"`)
	if !fine {
		return nil, false, nil, false
	}
	if id, rest, fine = plainString(rest); !fine {
		return nil, false, nil, false
	}
	if rest, fine = skipPrefix(rest, ','); !fine {
		return nil, false, nil, false
	}
	rest = trimWS(rest)
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		ok, rest = true, rest[len("true"):]
	case bytes.HasPrefix(rest, []byte("false")):
		rest = rest[len("false"):]
	default:
		return nil, false, nil, false
	}
	if rest, fine = skipPrefix(rest, ','); !fine {
		return nil, false, nil, false
	}
	if reason, rest, fine = plainString(rest); !fine || !frameEnd(rest) {
		return nil, false, nil, false
	}
	return id, ok, reason, true
}

// negMsgFrame splits ["NEG-MSG","<sub id>","<hex>"] whose strings hold no
// escapes; fine is false for anything else.
func negMsgFrame(data []byte) (sub, msg []byte, fine bool) {
	rest, fine := frameStart(data, `"NEG-MSG"`)
	if !fine {
		return nil, nil, false
	}
	if sub, rest, fine = plainString(rest); !fine {
		return nil, nil, false
	}
	if rest, fine = skipPrefix(rest, ','); !fine {
		return nil, nil, false
	}
	if msg, rest, fine = plainString(rest); !fine || !frameEnd(rest) {
		return nil, nil, false
	}
	return sub, msg, true
}

// frameStart skips '[', the quoted label and the comma after it.
func frameStart(data []byte, label string) ([]byte, bool) {
	rest, ok := skipPrefix(data, '[')
	if !ok {
		return nil, false
	}
	rest = trimWS(rest)
	if !bytes.HasPrefix(rest, []byte(label)) {
		return nil, false
	}
	return skipPrefix(rest[len(label):], ',')
}

// plainString reads a JSON string without escapes (after whitespace): its
// bytes and what follows its closing quote.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if b, ok = skipPrefix(b, '"'); !ok {
		return nil, nil, false
	}
	end := bytes.IndexByte(b, '"')
	if end < 0 || bytes.IndexByte(b[:end], '\\') >= 0 {
		return nil, nil, false
	}
	return b[:end], b[end+1:], true
}

// frameEnd tells whether only whitespace and the closing ']' are left.
func frameEnd(rest []byte) bool {
	tail := bytes.TrimSpace(rest)
	return len(tail) == 1 && tail[0] == ']'
}
