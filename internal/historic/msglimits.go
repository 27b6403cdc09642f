package historic

import (
	"slices"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// FitTagValues splits every filter of fs whose tag carries more than n
// values into filters of at most n values each (same other fields); fs
// itself is returned when none does.
func FitTagValues(fs []nostr.Filter, n int) []nostr.Filter {
	if n <= 0 || !slices.ContainsFunc(fs, func(f nostr.Filter) bool { return overValues(f, n) }) {
		return fs
	}
	out := make([]nostr.Filter, 0, len(fs))
	for _, f := range fs {
		out = append(out, splitValues(f, n)...)
	}
	return out
}

func overValues(f nostr.Filter, n int) bool {
	for _, vs := range f.Tags {
		if len(vs) > n {
			return true
		}
	}
	return false
}

// splitValues splits f's first tag over n values into chunks, recursively
// for the next one.
func splitValues(f nostr.Filter, n int) []nostr.Filter {
	keys := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := f.Tags[k]
		if len(vs) <= n {
			continue
		}
		var out []nostr.Filter
		for start := 0; start < len(vs); start += n {
			g := f
			g.Tags = make(nostr.TagMap, len(f.Tags))
			for k2, v2 := range f.Tags {
				g.Tags[k2] = v2
			}
			g.Tags[k] = slices.Clone(vs[start:min(start+n, len(vs))])
			out = append(out, splitValues(g, n)...)
		}
		return out
	}
	return []nostr.Filter{f}
}

// defaultMaxMessage is the message size assumed for a relay that announces
// none (NIP-11 max_message_length): strfry's default, the smallest in use
// among the common relays (khatru: 512,000).
const defaultMaxMessage = 131_072

// messageLimit is the largest message url accepts, as announced or assumed.
func messageLimit(l relay.Limits) int {
	if l.MaxMessageLength > 0 {
		return l.MaxMessageLength
	}
	return defaultMaxMessage
}

// ReqBytesLimit bounds the filter JSON of one REQ for a relay: maxReqBytes,
// lowered to fit its message size with room for the envelope.
func ReqBytesLimit(l relay.Limits) int {
	return max(1024, min(maxReqBytes, messageLimit(l)-1024))
}

// negFrameLimit is the NIP-77 frame limit (binary bytes) for a relay and a
// filter of filterLen bytes of JSON: the configured limit, lowered so a
// NEG-OPEN (hex message plus filter) or NEG-MSG fits the relay's message
// size; never below the protocol engine's minimum of 4096.
func negFrameLimit(configured int, l relay.Limits, filterLen int) int {
	room := (messageLimit(l) - filterLen - 256) / 2
	if configured == 0 || room < configured {
		configured = room
	}
	return max(configured, 4096)
}

// idsPerReq is how many ids one fetching REQ carries: batch, lowered so the
// REQ fits the relay's message size (an id takes 67 bytes of JSON).
func idsPerReq(batch int, l relay.Limits) int {
	return max(1, min(batch, (messageLimit(l)-256)/67))
}

// maxReqBytes bounds the filters of one REQ message: relays drop the
// connection on larger messages (strfry's default maxWebsocketPayloadSize is
// 131072 bytes, khatru's MaxMessageSize 512000), and 100 Layer 3 filters of
// 100 event ids take about 680 kB.
const maxReqBytes = 120_000

// FilterBytes is the size of f's JSON (as Filter.MarshalJSON writes it)
// and a comma, counted without building it (relay.FilterJSONSize).
func FilterBytes(f nostr.Filter) int {
	return relay.FilterJSONSize(f) + 1
}
