package relay

import (
	"strconv"

	"github.com/mailru/easyjson/jwriter"
	"github.com/nbd-wtf/go-nostr"
)

// Filters are encoded here rather than by go-nostr's easyjson encoder,
// which escapes each string byte by byte: every filter of every REQ and
// NEG-OPEN is measured before it is sent (FilterJSONSize) and then
// written, and a Layer 3 filter names up to hundreds of ids. The JSON is
// Filter.MarshalJSON's (with NoEscapeHTML, as go-nostr's envelopes write
// it): the same fields in the same order, tags in the map's order. A
// string of printable ASCII without a quote or backslash — ids, pubkeys,
// addresses, most d tags: nearly all of what a sidecar's filters hold — is
// copied as it is; any other goes through easyjson's escaping.

// plainJSON tells the bytes copied as they are here: printable ASCII but
// a quote and a backslash. (easyjson copies DEL too; a string holding one
// takes its path.)
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainJSONString tells whether every byte of s is plainJSON: eight at a
// time, then the rest one by one.
func plainJSONString(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs } // a zero byte
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		// Below 0x20, 0x7f or above, a quote, a backslash.
		if (x-ones*0x20)&^x&highs|((x+ones*1)|x)&highs|zero(x^(ones*'"'))|zero(x^(ones*'\\')) != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !plainJSON[s[i]] {
			return false
		}
	}
	return true
}

// appendJSONString appends s as a JSON string, as easyjson's Writer.String
// (NoEscapeHTML) does.
func appendJSONString(dst []byte, s string) []byte {
	if plainJSONString(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	w := jwriter.Writer{NoEscapeHTML: true}
	w.String(s)
	b, _ := w.BuildBytes()
	return append(dst, b...)
}

// jsonStringSize is len(appendJSONString(nil, s)).
func jsonStringSize(s string) int {
	if plainJSONString(s) {
		return len(s) + 2
	}
	w := jwriter.Writer{NoEscapeHTML: true}
	w.String(s)
	return w.Size()
}

func intSize(n int64) int {
	var b [24]byte
	return len(strconv.AppendInt(b[:0], n, 10))
}

// appendFilter appends f's JSON (see above).
func appendFilter(dst []byte, f nostr.Filter) []byte {
	dst = append(dst, '{')
	first := true
	key := func(k string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, k...)
	}
	strs := func(vs []string) {
		dst = append(dst, '[')
		for i, v := range vs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	if len(f.IDs) != 0 {
		key(`"ids":`)
		strs(f.IDs)
	}
	if len(f.Kinds) != 0 {
		key(`"kinds":`)
		dst = append(dst, '[')
		for i, k := range f.Kinds {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(k), 10)
		}
		dst = append(dst, ']')
	}
	if len(f.Authors) != 0 {
		key(`"authors":`)
		strs(f.Authors)
	}
	if f.Since != nil {
		key(`"since":`)
		dst = strconv.AppendInt(dst, int64(*f.Since), 10)
	}
	if f.Until != nil {
		key(`"until":`)
		dst = strconv.AppendInt(dst, int64(*f.Until), 10)
	}
	if f.Limit != 0 || f.LimitZero {
		key(`"limit":`)
		dst = strconv.AppendInt(dst, int64(f.Limit), 10)
	}
	if f.Search != "" {
		key(`"search":`)
		dst = appendJSONString(dst, f.Search)
	}
	for tag, values := range f.Tags {
		// The tag's name as it is, as go-nostr writes it.
		key(`"#`)
		dst = append(append(dst, tag...), `":`...)
		strs(values)
	}
	return append(dst, '}')
}

// FilterJSONSize is the length of f's JSON as Filter.MarshalJSON writes
// it, counted without building it.
func FilterJSONSize(f nostr.Filter) int {
	n := 2 // {}
	fields := 0
	strs := func(vs []string) int {
		m := 2 + max(len(vs)-1, 0) // [] and commas
		for _, v := range vs {
			m += jsonStringSize(v)
		}
		return m
	}
	if len(f.IDs) != 0 {
		fields++
		n += len(`"ids":`) + strs(f.IDs)
	}
	if len(f.Kinds) != 0 {
		fields++
		n += len(`"kinds":`) + 2 + len(f.Kinds) - 1
		for _, k := range f.Kinds {
			n += intSize(int64(k))
		}
	}
	if len(f.Authors) != 0 {
		fields++
		n += len(`"authors":`) + strs(f.Authors)
	}
	if f.Since != nil {
		fields++
		n += len(`"since":`) + intSize(int64(*f.Since))
	}
	if f.Until != nil {
		fields++
		n += len(`"until":`) + intSize(int64(*f.Until))
	}
	if f.Limit != 0 || f.LimitZero {
		fields++
		n += len(`"limit":`) + intSize(int64(f.Limit))
	}
	if f.Search != "" {
		fields++
		n += len(`"search":`) + jsonStringSize(f.Search)
	}
	for tag, values := range f.Tags {
		fields++
		n += len(`"#":`) + len(tag) + strs(values)
	}
	return n + max(fields-1, 0)
}

// reqJSON is nostr.ReqEnvelope's JSON (the subscription id as it is, as
// there), in one slice of its size.
func reqJSON(subID string, filters nostr.Filters) []byte {
	n := len(`["REQ",""]`) + len(subID)
	for _, f := range filters {
		n += 1 + FilterJSONSize(f)
	}
	b := make([]byte, 0, n)
	b = append(append(append(b, `["REQ","`...), subID...), '"')
	for _, f := range filters {
		b = appendFilter(append(b, ','), f)
	}
	return append(b, ']')
}
