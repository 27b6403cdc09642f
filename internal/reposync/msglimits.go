package reposync

import (
	"slices"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// valuesPerFilter is how many tag values one filter to url carries: the
// configured sync.values_per_filter, lowered to what the relay taught.
func (e *Engine) valuesPerFilter(url string) int {
	n := e.cfg.ValuesPerFilter
	if l := e.d.Health.Limits(url).MaxTagValues; l > 0 && (n <= 0 || l < n) {
		n = l
	}
	return n
}

// learnTagValues: url refused filters for their tag values, of which one
// tag carried most values (relay.MostTagValues); half of it is its bound
// from then on (refusals of REQs built alike teach the same bound, not
// halves of halves).
func (e *Engine) learnTagValues(url string, most int, why string) {
	if most > 1 {
		e.d.Health.Learn(url, relay.Limits{MaxTagValues: most / 2}, why)
	}
}

// fitTagValues splits every filter of fs whose tag carries more than n
// values into filters of at most n values each (same other fields); fs
// itself is returned when none does.
func fitTagValues(fs []nostr.Filter, n int) []nostr.Filter {
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

// learnFilters: url refused a REQ of sent filters for their number, a
// limit it does not announce (or announces higher). The health tracker
// keeps half of it as the relay's bound, so the REQs rebuilt next fit
// (halving again if the relay still refuses) instead of failing the same
// way in a loop.
func (e *Engine) learnFilters(url string, sent int, why string) {
	if sent > 1 {
		e.d.Health.Learn(url, relay.Limits{MaxFilters: sent / 2}, why)
	}
}

// learnMessageSize: the connection to url ended; if the relay closed it
// for a message too big (status 1009), the health tracker keeps half of
// the largest message sent on it as the relay's message size, so that
// REQs, NEG-OPENs, NEG-MSGs and fetch-by-id batches are built within it
// after the reconnect.
func (e *Engine) learnMessageSize(url string, c *relay.Conn, err error) {
	if !relay.MessageTooBig(err) {
		return
	}
	if sent := int(c.Stats().MaxFrameOut); sent > 0 {
		e.d.Health.Learn(url, relay.Limits{MaxMessageLength: sent / 2}, "closed for a message too big: "+err.Error())
	}
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

// reqBytesLimit bounds the filter JSON of one REQ for a relay: maxReqBytes,
// lowered to fit its message size with room for the envelope.
func reqBytesLimit(l relay.Limits) int {
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
