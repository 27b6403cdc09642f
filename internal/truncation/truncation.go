// Package truncation remembers the relays caught returning fewer events
// than they hold (a NIP-77 set or REQ page cut at a cap, a tied second not
// read whole), for the log, the metric and /status, splits a tied second's
// filter into narrower ones (SplitTie), and counts a since subscription's
// answer to tell whether it reached the relay's cap (CapCount).
package truncation

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Kinds of truncation a relay is caught at (the metric's kind label).
const (
	// Negentropy: a NIP-77 set held fewer events than the relay serves
	// (khatru on its slicestore: the 500 newest).
	Negentropy = "negentropy"
	// Req: a REQ returned fewer events than asked although the relay
	// held more below them (ngit-relay: 250 for any limit above 1000).
	Req = "req"
	// Tie: a second held more events than a REQ returns, and
	// neither NIP-77 nor a split filter read it whole (historic's resolveSecond).
	Tie = "tie"
)

// Kinds are the kinds, in the order Describe lists them.
var Kinds = []string{Negentropy, Req, Tie}

// Tracker remembers relays caught returning less than they hold: it
// warns once per relay and kind, counts every detection
// (ngit_sync_truncation_detected_total) and describes it for /status. The
// a nil *Tracker records nothing.
type Tracker struct {
	log     *zap.Logger
	counter *prometheus.CounterVec

	mu   sync.Mutex
	seen map[string]map[string]string // relay → kind → what was seen
	// cut are the seconds of each relay that stay cut (Tie), with
	// what was seen, until a later sweep reads them whole.
	cut map[string]map[nostr.Timestamp]string
}

// New returns a Tracker counting on counter (labels relay, kind).
func New(counter *prometheus.CounterVec, log *zap.Logger) *Tracker {
	return &Tracker{log: log, counter: counter, seen: map[string]map[string]string{}, cut: map[string]map[nostr.Timestamp]string{}}
}

// Detected records that url truncated (kind) as described by what.
func (t *Tracker) Detected(url, kind, what string) {
	if t == nil {
		return
	}
	t.counter.WithLabelValues(url, kind).Inc()
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.seen[url]
	if m == nil {
		m = map[string]string{}
		t.seen[url] = m
	}
	if _, warned := m[kind]; !warned && kind == Tie {
		t.log.Warn("a second of the relay's history holds more events than it returns per REQ, and neither NIP-77 nor splitting the filter read it whole; the events beyond are not seen, and the relay is not reported synced",
			zap.String("relay", url), zap.String("detected", what))
	} else if !warned {
		t.log.Warn("relay silently truncates results; fetching the rest below the cut",
			zap.String("relay", url), zap.String("kind", kind), zap.String("detected", what))
	}
	m[kind] = what
}

// Truncates tells whether url was caught truncating kind.
func (t *Tracker) Truncates(url, kind string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.seen[url][kind]
	return ok
}

// TieCut records that second ts of url stays cut (what: the error).
func (t *Tracker) TieCut(url string, ts nostr.Timestamp, what string) {
	if t == nil {
		return
	}
	t.Detected(url, Tie, what)
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.cut[url]
	if m == nil {
		m = map[nostr.Timestamp]string{}
		t.cut[url] = m
	}
	m[ts] = what
}

// TieResolved records that second ts of url was read whole.
func (t *Tracker) TieResolved(url string, ts nostr.Timestamp) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.cut[url]; m != nil {
		delete(m, ts)
		if len(m) == 0 {
			delete(t.cut, url)
		}
	}
}

// TiesCut returns how many seconds of url's history stay cut: more events
// at one created_at than it returns, not read whole (0 when none).
func (t *Tracker) TiesCut(url string) int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cut[url])
}

// AnyTiesCut returns how many relays have seconds that stay cut.
func (t *Tracker) AnyTiesCut() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cut)
}

// Describe returns what was detected on url ("" when nothing).
func (t *Tracker) Describe(url string) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, k := range Kinds {
		if w, ok := t.seen[url][k]; ok {
			parts = append(parts, k+": "+w)
		}
	}
	return strings.Join(parts, "; ")
}

// Track creates url's series at 0, one per kind, so the first truncation
// caught on a newly tracked relay shows in a rate.
func (t *Tracker) Track(url string) {
	for _, k := range Kinds {
		if t != nil {
			t.counter.WithLabelValues(url, k)
		}
	}
}

func (t *Tracker) Forget(url string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.seen, url)
	delete(t.cut, url)
	t.mu.Unlock()
	for _, k := range Kinds {
		t.counter.DeleteLabelValues(url, k)
	}
}

// OtherKindsUnasked is SplitTie's lossy when it split a filter naming no
// kinds into splitKinds: events of other kinds at that second cannot be
// asked for apart. No relay says whether any exist, so when every part
// was read whole the second is not counted as cut (README, "Remote relays
// as they are").
const OtherKindsUnasked = "events of other kinds than NIP-34's and those discussing it cannot be asked for apart"

// splitKinds are the kinds a tied second is split into when the filter
// names none: NIP-34 and the kinds that discuss it.
var splitKinds = []int{1, 7, 1111, 1617, 1618, 1619, 1621, 1630, 1631, 1632, 1633, 30617, 30618, 5, 9735, 10317}

// tieParts is how many parts a tied second's tag values or authors are
// split into at a time: every part's REQ returns up to a page, so fewer
// levels of splitting receive fewer events twice (halves: about three
// times a 2,000-event second at pages of 500; eighths: one and a half).
const tieParts = 8

// SplitTie splits a tied second's filter into narrower ones: parts of a
// tag's values, else one filter per kind, else parts of its authors, else
// (no authors named) the authors of known in parts. lossy
// says what no part covers: events of kinds not asked when sf names none,
// or of authors not seen when it names none. Nothing is returned when sf
// cannot be narrowed.
func SplitTie(sf nostr.Filter, known []*nostr.Event) (children []nostr.Filter, lossy string) {
	tags := make([]string, 0, len(sf.Tags))
	for tag := range sf.Tags {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	for _, tag := range tags {
		if vs := sf.Tags[tag]; len(vs) > 1 {
			for _, part := range parts(vs) {
				cf := sf
				cf.Tags = make(nostr.TagMap, len(sf.Tags))
				for k, v := range sf.Tags {
					cf.Tags[k] = v
				}
				cf.Tags[tag] = part
				children = append(children, cf)
			}
			return children, ""
		}
	}
	if len(sf.Kinds) != 1 {
		kinds := sf.Kinds
		if len(kinds) == 0 {
			kinds, lossy = splitKinds, OtherKindsUnasked
		}
		for _, k := range kinds {
			cf := sf
			cf.Kinds = []int{k}
			children = append(children, cf)
		}
		return children, lossy
	}
	authors := sf.Authors
	if len(authors) == 0 {
		for _, ev := range known {
			authors = append(authors, ev.PubKey)
		}
		slices.Sort(authors)
		authors = slices.Compact(authors)
		if len(authors) == 0 {
			return nil, ""
		}
		lossy = fmt.Sprintf("events by other authors than the %d seen cannot be asked for", len(authors))
		if len(authors) == 1 {
			cf := sf
			cf.Authors = authors
			return []nostr.Filter{cf}, lossy
		}
	}
	if len(authors) < 2 {
		return nil, ""
	}
	for _, part := range parts(authors) {
		cf := sf
		cf.Authors = part
		children = append(children, cf)
	}
	return children, lossy
}

// parts splits vs (at least two) into up to tieParts parts of about the
// same size, each narrower than vs.
func parts(vs []string) [][]string {
	n := min(tieParts, len(vs))
	out := make([][]string, 0, n)
	for i := range n {
		lo, hi := i*len(vs)/n, (i+1)*len(vs)/n
		out = append(out, vs[lo:hi:hi])
	}
	return out
}

// FilterText names a filter's kinds, authors and tags in an error.
func FilterText(f nostr.Filter) string {
	s := fmt.Sprintf("kinds %v", f.Kinds)
	if len(f.Authors) > 0 {
		s += fmt.Sprintf(", %d authors", len(f.Authors))
	}
	for tag, vs := range f.Tags {
		s += fmt.Sprintf(", %d #%s values", len(vs), tag)
	}
	return s
}
