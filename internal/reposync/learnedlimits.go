package reposync

import (
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// learnedLimits are the limits the engine learns of remote relays from
// their refusals, kept by the health tracker (which guards them itself).
type learnedLimits struct {
	cfg    *Config // the engine's: ValuesPerFilter, the configured sync.values_per_filter
	health *health.Tracker
}

// valuesPerFilter is how many tag values one filter to url carries: the
// configured sync.values_per_filter, lowered to what the relay taught.
func (l learnedLimits) valuesPerFilter(url string) int {
	n := l.cfg.ValuesPerFilter
	if m := l.health.Limits(url).MaxTagValues; m > 0 && (n <= 0 || m < n) {
		n = m
	}
	return n
}

// learnTagValues: url refused filters for their tag values, of which one
// tag carried most values (relay.MostTagValues); half of it is its bound
// from then on (refusals of REQs built alike teach the same bound, not
// halves of halves).
func (l learnedLimits) learnTagValues(url string, most int, why string) {
	if most > 1 {
		l.health.Learn(url, relay.Limits{MaxTagValues: most / 2}, why)
	}
}

// learnFilters: url refused a REQ of sent filters for their number, a
// limit it does not announce (or announces higher). The health tracker
// keeps half of it as the relay's bound, so the REQs rebuilt next fit
// (halving again if the relay still refuses) instead of failing the same
// way in a loop.
func (l learnedLimits) learnFilters(url string, sent int, why string) {
	if sent > 1 {
		l.health.Learn(url, relay.Limits{MaxFilters: sent / 2}, why)
	}
}

// learnMessageSize: the connection to url ended; if the relay closed it
// for a message too big (status 1009), the health tracker keeps half of
// the largest message sent on it as the relay's message size, so that
// REQs, NEG-OPENs, NEG-MSGs and fetch-by-id batches are built within it
// after the reconnect.
func (l learnedLimits) learnMessageSize(url string, c *relay.Conn, err error) {
	if !relay.MessageTooBig(err) {
		return
	}
	if sent := int(c.Stats().MaxFrameOut); sent > 0 {
		l.health.Learn(url, relay.Limits{MaxMessageLength: sent / 2}, "closed for a message too big: "+err.Error())
	}
}
