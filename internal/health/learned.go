package health

import (
	"sync/atomic"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// OnFirstAnswer returns a relay.Options.OnFrame for one connection: it
// calls next (when set) with every frame, and achieved once, at the first
// frame that answers a request (an EVENT, an EOSE, a NEG-MSG or an OK):
// the sync engine's hook for Tracker.Achieved.
func OnFirstAnswer(next func(label string, size int), achieved func()) func(label string, size int) {
	var answered atomic.Bool
	return func(label string, size int) {
		if next != nil {
			next(label, size)
		}
		switch label {
		case "EVENT", "EOSE", "NEG-MSG", "OK":
			if !answered.Load() && answered.CompareAndSwap(false, true) {
				achieved()
			}
		}
	}
}

// Learned is the sync engine's side of the limits relays teach by
// refusing requests, kept by a Tracker (Learn, Limits): it turns a
// refusal into the bound it teaches and tells the bounds requests are
// built within.
type Learned struct {
	Tracker *Tracker
	// PerFilter is the configured sync.values_per_filter.
	PerFilter int
}

// ValuesPerFilter is how many tag values one filter to url carries: the
// configured sync.values_per_filter, lowered to what the relay taught.
func (l Learned) ValuesPerFilter(url string) int {
	n := l.PerFilter
	if m := l.Tracker.Limits(url).MaxTagValues; m > 0 && (n <= 0 || m < n) {
		n = m
	}
	return n
}

// LearnTagValues: url refused filters for their tag values, of which one
// tag carried most values (relay.MostTagValues); half of it is its bound
// from then on (refusals of REQs built alike teach the same bound, not
// halves of halves).
func (l Learned) LearnTagValues(url string, most int, why string) {
	if most > 1 {
		l.Tracker.Learn(url, relay.Limits{MaxTagValues: most / 2}, why)
	}
}

// LearnFilters: url refused a REQ of sent filters for their number, a
// limit it does not announce (or announces higher). The tracker keeps
// half of it as the relay's bound, so the REQs rebuilt next fit (halving
// again if the relay still refuses) instead of failing the same way in a
// loop.
func (l Learned) LearnFilters(url string, sent int, why string) {
	if sent > 1 {
		l.Tracker.Learn(url, relay.Limits{MaxFilters: sent / 2}, why)
	}
}

// LearnMessageSize: the connection c to url ended with err; if the relay
// closed it for a message too big (status 1009), the tracker keeps half
// of the largest message sent on it as the relay's message size, so that
// REQs, NEG-OPENs, NEG-MSGs and fetch-by-id batches are built within it
// after the reconnect.
func (l Learned) LearnMessageSize(url string, c *relay.Conn, err error) {
	if !relay.MessageTooBig(err) {
		return
	}
	if sent := int(c.Stats().MaxFrameOut); sent > 0 {
		l.Tracker.Learn(url, relay.Limits{MaxMessageLength: sent / 2}, "closed for a message too big: "+err.Error())
	}
}
