package purgatory

import (
	"sync"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// throttle limits git requests per domain: at most concurrency in flight and
// perWindow within any window. Identifiers that found a domain busy wait in
// that domain's round-robin queue; they are started when capacity frees
// (a request ends, or the oldest request leaves the window), never by polling.
//
// A request occupies the rate window from its start until window after its
// end, so a server counting requests by arrival never sees more than
// perWindow in any window.
type throttle struct {
	clock       clock.Clock
	concurrency int
	perWindow   int
	window      time.Duration
	m           *metrics

	// spawn runs fn in a goroutine owned by the purgatory's lifecycle; it
	// reports false when the purgatory is stopping.
	spawn func(fn func()) bool
	// work syncs identifier from one untried URL of domain using lease l.
	// It returns the URL tried and true, or false when there was nothing to
	// do for this domain (l is then still unused and the caller releases it).
	work func(domain, identifier string, tried map[string]bool, l *lease) (string, bool)

	mu      sync.Mutex
	domains map[string]*domainState
}

type domainState struct {
	inFlight int
	units    int         // rate units held by in-flight leases
	ended    []time.Time // end times of requests still inside the window

	order  []string // round-robin queue of identifiers
	queued map[string]*queuedIdentifier
	rr     int

	timer clock.Timer
}

type queuedIdentifier struct {
	tried      map[string]bool // URLs of this domain already tried
	inProgress bool
}

func newThrottle(clk clock.Clock, concurrency, perWindow int, window time.Duration, m *metrics) *throttle {
	return &throttle{clock: clk, concurrency: concurrency, perWindow: perWindow, window: window, m: m,
		domains: map[string]*domainState{}}
}

func (t *throttle) state(domain string) *domainState {
	d, ok := t.domains[domain]
	if !ok {
		if len(t.domains) >= sweepDomainsAt {
			t.sweep()
		}
		d = &domainState{queued: map[string]*queuedIdentifier{}}
		t.domains[domain] = d
	}
	return d
}

// sweepDomainsAt is the number of tracked domains above which idle ones
// are forgotten when a new domain appears.
const sweepDomainsAt = 256

// sweep forgets domains with nothing queued, in flight or in the window.
func (t *throttle) sweep() {
	now := t.clock.Now()
	for name, d := range t.domains {
		d.prune(now, t.window)
		if len(d.order) == 0 && d.inFlight == 0 && len(d.ended) == 0 && d.timer == nil {
			delete(t.domains, name)
		}
	}
}

func (d *domainState) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(d.ended) && now.Sub(d.ended[i]) >= window {
		i++
	}
	if i > 0 {
		d.ended = append(d.ended[:0], d.ended[i:]...)
	}
}

func (t *throttle) hasCapacity(d *domainState, now time.Time) bool {
	d.prune(now, t.window)
	return d.inFlight < t.concurrency && d.units+len(d.ended) < t.perWindow
}

// lease is one request slot on a domain. It is used by one goroutine.
type lease struct {
	t        *throttle
	domain   string
	units    int
	released bool
}

// tryAcquire takes a request slot on domain, or returns nil when the domain
// is throttled.
func (t *throttle) tryAcquire(domain string) *lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(domain)
	if !t.hasCapacity(d, t.clock.Now()) {
		return nil
	}
	return t.take(domain, d)
}

func (t *throttle) take(domain string, d *domainState) *lease {
	d.inFlight++
	d.units++
	if t.m != nil {
		t.m.domainInFlight.WithLabelValues(t.m.domain(domain)).Inc()
	}
	return &lease{t: t, domain: domain, units: 1}
}

// Extra asks for one more git request within the same round (a retry after
// "not our ref"): allowed while the rate window has room.
func (l *lease) Extra() bool {
	t := l.t
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(l.domain)
	d.prune(t.clock.Now(), t.window)
	if d.units+len(d.ended) >= t.perWindow {
		return false
	}
	d.units++
	l.units++
	return true
}

// release ends the request. used=false returns a slot that never reached
// the remote (it then does not count against the rate window).
func (l *lease) release(used bool) {
	if l.released {
		return
	}
	l.released = true
	t := l.t
	t.mu.Lock()
	d := t.state(l.domain)
	now := t.clock.Now()
	d.inFlight--
	d.units -= l.units
	if used {
		for i := 0; i < l.units; i++ {
			d.ended = append(d.ended, now)
		}
	}
	if t.m != nil {
		t.m.domainInFlight.WithLabelValues(t.m.domain(l.domain)).Dec()
	}
	t.mu.Unlock()
	t.pump(l.domain)
}

// throttled reports whether domain has no capacity now.
func (t *throttle) throttled(domain string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.hasCapacity(t.state(domain), t.clock.Now())
}

// enqueue adds identifier to domain's waiting queue (merging tried URLs)
// and starts work if the domain has capacity.
func (t *throttle) enqueue(domain, identifier string, tried map[string]bool) {
	t.mu.Lock()
	d := t.state(domain)
	q, ok := d.queued[identifier]
	if !ok {
		q = &queuedIdentifier{tried: map[string]bool{}}
		d.queued[identifier] = q
		d.order = append(d.order, identifier)
	}
	for u := range tried {
		q.tried[u] = true
	}
	t.mu.Unlock()
	t.pump(domain)
}

// nextReady picks the next queued identifier not in progress, round-robin,
// and marks it in progress.
func (d *domainState) nextReady() string {
	n := len(d.order)
	for i := 0; i < n; i++ {
		idx := (d.rr + i) % n
		id := d.order[idx]
		if q := d.queued[id]; !q.inProgress {
			q.inProgress = true
			d.rr = (idx + 1) % n
			return id
		}
	}
	return ""
}

func (d *domainState) hasReady() bool {
	for _, q := range d.queued {
		if !q.inProgress {
			return true
		}
	}
	return false
}

// removeIdentifier drops id from the queue, keeping the round-robin position.
func (d *domainState) removeIdentifier(id string) {
	if _, ok := d.queued[id]; !ok {
		return
	}
	delete(d.queued, id)
	for i, x := range d.order {
		if x != id {
			continue
		}
		d.order = append(d.order[:i], d.order[i+1:]...)
		if i < d.rr {
			d.rr--
		}
		break
	}
	if len(d.order) == 0 {
		d.rr = 0
	} else {
		d.rr %= len(d.order)
	}
}

// pump starts queued identifiers while domain has capacity. When only the
// rate window blocks, it arms a timer for the moment the oldest request
// leaves the window.
func (t *throttle) pump(domain string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(domain)
	now := t.clock.Now()
	for t.hasCapacity(d, now) {
		id := d.nextReady()
		if id == "" {
			break
		}
		l := t.take(domain, d)
		tried := make(map[string]bool, len(d.queued[id].tried))
		for u := range d.queued[id].tried {
			tried[u] = true
		}
		ok := t.spawn(func() { t.runQueued(domain, id, tried, l) })
		if !ok {
			d.inFlight--
			d.units--
			d.queued[id].inProgress = false
			if t.m != nil {
				t.m.domainInFlight.WithLabelValues(t.m.domain(domain)).Dec()
			}
			return
		}
	}
	if d.timer == nil && d.inFlight < t.concurrency && len(d.ended) > 0 && d.hasReady() {
		wait := t.window - now.Sub(d.ended[0])
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		d.timer = t.clock.AfterFunc(wait, func() {
			t.mu.Lock()
			d.timer = nil
			t.mu.Unlock()
			t.pump(domain)
		})
	}
	if len(d.order) == 0 && d.inFlight == 0 && len(d.ended) == 0 && d.timer == nil {
		delete(t.domains, domain)
	}
}

func (t *throttle) runQueued(domain, id string, tried map[string]bool, l *lease) {
	url, used := t.work(domain, id, tried, l)
	if !used {
		l.release(false)
	}
	t.mu.Lock()
	d := t.state(domain)
	if q, ok := d.queued[id]; ok {
		if used {
			q.tried[url] = true
			q.inProgress = false
		} else {
			d.removeIdentifier(id)
		}
	}
	t.mu.Unlock()
	t.pump(domain)
}

// stop cancels pending window timers.
func (t *throttle) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.domains {
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
	}
}

// queuedCount returns how many identifiers wait on domain (for tests).
func (t *throttle) queuedCount(domain string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.domains[domain]; ok {
		return len(d.order)
	}
	return 0
}
