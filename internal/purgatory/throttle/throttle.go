// Package throttle limits the purgatory's git requests per clone URL
// domain: requests in flight and requests within a sliding window, with a
// round-robin queue per domain of the identifiers waiting for a slot.
package throttle

import (
	"sort"
	"sync"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// Throttle limits git requests per domain: at most Concurrency in flight
// and PerWindow within any Window. Identifiers that found a domain busy wait
// in that domain's round-robin queue; they are started when capacity frees
// (a request ends, or the oldest request leaves the window), never by
// polling.
//
// A request occupies the rate window from its start until Window after its
// end, so a server counting requests by arrival never sees more than
// PerWindow in any window.
//
// An identifier waiting in a queue has not failed: Options.Waiting counts
// it, Status shows it, and Options.Left says when the queue let it go.
type Throttle struct {
	o     Options
	clock clock.Clock

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
	// waiting counts the queued identifiers not in progress.
	waiting int

	timer   clock.Timer
	timerAt time.Time
}

type queuedIdentifier struct {
	tried      map[string]bool // URLs of this domain already tried
	inProgress bool
}

// Options configure a Throttle. Concurrency, PerWindow, Window, Spawn and
// Work are required.
type Options struct {
	Concurrency, PerWindow int
	Window                 time.Duration
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Spawn runs fn in a goroutine owned by the caller's lifecycle; it
	// reports false when the caller is stopping.
	Spawn func(fn func()) bool
	// Work syncs identifier from one untried URL of domain using lease l.
	// It returns the URL tried and true, or false when there was nothing to
	// do for this domain (l is then still unused and the caller releases
	// it); more says the identifier still needs data and the domain has
	// URLs of it left to try.
	Work func(domain, identifier string, tried map[string]bool, l *Lease) (url string, used, more bool)
	// Left, when set, is told (without the throttle's lock) that identifier
	// left domain's queue.
	Left func(domain, identifier string)
	// InFlight and Waiting, when set, are told each change of a domain's
	// requests in flight and identifiers waiting (under the lock: they must
	// not call back).
	InFlight, Waiting func(domain string, delta int)
}

// New returns a Throttle.
func New(o Options) *Throttle {
	t := &Throttle{o: o, clock: o.Clock, domains: map[string]*domainState{}}
	if t.clock == nil {
		t.clock = clock.Real{}
	}
	return t
}

func (t *Throttle) inFlight(domain string, n int) {
	if t.o.InFlight != nil {
		t.o.InFlight(domain, n)
	}
}

func (t *Throttle) state(domain string) *domainState {
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
func (t *Throttle) sweep() {
	now := t.clock.Now()
	for name, d := range t.domains {
		d.prune(now, t.o.Window)
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

func (t *Throttle) hasCapacity(d *domainState, now time.Time) bool {
	d.prune(now, t.o.Window)
	return d.inFlight < t.o.Concurrency && d.units+len(d.ended) < t.o.PerWindow
}

// Lease is one request slot on a domain. It is used by one goroutine.
type Lease struct {
	t        *Throttle
	domain   string
	units    int
	released bool
}

// TryAcquire takes a request slot on domain, or returns nil when the domain
// is throttled.
func (t *Throttle) TryAcquire(domain string) *Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(domain)
	if !t.hasCapacity(d, t.clock.Now()) {
		return nil
	}
	return t.take(domain, d)
}

func (t *Throttle) take(domain string, d *domainState) *Lease {
	d.inFlight++
	d.units++
	t.inFlight(domain, 1)
	return &Lease{t: t, domain: domain, units: 1}
}

// Extra asks for one more git request within the same round (a retry after
// "not our ref"): allowed while the rate window has room.
func (l *Lease) Extra() bool {
	t := l.t
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(l.domain)
	d.prune(t.clock.Now(), t.o.Window)
	if d.units+len(d.ended) >= t.o.PerWindow {
		return false
	}
	d.units++
	l.units++
	return true
}

// Release ends the request. used=false returns a slot that never reached
// the remote (it then does not count against the rate window).
func (l *Lease) Release(used bool) {
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
	t.inFlight(l.domain, -1)
	t.mu.Unlock()
	t.pump(l.domain)
}

// Enqueue adds identifier to domain's waiting queue (merging tried URLs)
// and starts work if the domain has capacity.
func (t *Throttle) Enqueue(domain, identifier string, tried map[string]bool) {
	t.mu.Lock()
	d := t.state(domain)
	q, ok := d.queued[identifier]
	if !ok {
		q = &queuedIdentifier{tried: map[string]bool{}}
		d.queued[identifier] = q
		d.order = append(d.order, identifier)
		t.addWaiting(domain, d, 1)
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

// addWaiting changes domain's count of waiting identifiers and its gauge.
func (t *Throttle) addWaiting(domain string, d *domainState, n int) {
	d.waiting += n
	if t.o.Waiting != nil {
		t.o.Waiting(domain, n)
	}
}

// removeIdentifier drops id from the queue, keeping the round-robin position.
func (t *Throttle) removeIdentifier(domain string, d *domainState, id string) {
	q, ok := d.queued[id]
	if !ok {
		return
	}
	if !q.inProgress {
		t.addWaiting(domain, d, -1)
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
func (t *Throttle) pump(domain string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.state(domain)
	now := t.clock.Now()
	for t.hasCapacity(d, now) {
		id := d.nextReady()
		if id == "" {
			break
		}
		t.addWaiting(domain, d, -1)
		l := t.take(domain, d)
		tried := make(map[string]bool, len(d.queued[id].tried))
		for u := range d.queued[id].tried {
			tried[u] = true
		}
		ok := t.o.Spawn(func() { t.runQueued(domain, id, tried, l) })
		if !ok {
			d.inFlight--
			d.units--
			d.queued[id].inProgress = false
			t.addWaiting(domain, d, 1)
			t.inFlight(domain, -1)
			return
		}
	}
	if d.timer == nil && d.inFlight < t.o.Concurrency && len(d.ended) > 0 && d.hasReady() {
		wait := t.o.Window - now.Sub(d.ended[0])
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		d.timerAt = now.Add(wait)
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

// runQueued runs one queued fetch; the identifier stays queued while the
// domain has more of its URLs to try, and leaves otherwise.
func (t *Throttle) runQueued(domain, id string, tried map[string]bool, l *Lease) {
	url, used, more := t.o.Work(domain, id, tried, l)
	if !used {
		l.Release(false)
	}
	t.mu.Lock()
	d := t.state(domain)
	left := false
	if q, ok := d.queued[id]; ok {
		if used {
			q.tried[url] = true
		}
		if used && more {
			q.inProgress = false
			t.addWaiting(domain, d, 1)
		} else {
			t.removeIdentifier(domain, d, id)
			left = true
		}
	}
	t.mu.Unlock()
	if left && t.o.Left != nil {
		t.o.Left(domain, id)
	}
	t.pump(domain)
}

// Stop cancels pending window timers.
func (t *Throttle) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.domains {
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
	}
}

// DomainStatus is one clone URL domain's request throttle at a moment.
type DomainStatus struct {
	Domain string
	// Waiting counts identifiers waiting for a request slot; InFlight the
	// git requests running; InWindow the requests counted in the rate
	// window now (running or ended less than the window ago).
	Waiting, InFlight, InWindow int
	// NextSlot is when the rate window frees its next slot, zero when a
	// slot frees only as a running request ends (or none is needed).
	NextSlot time.Time
}

// Status returns the domains with requests queued, running or in the
// window, by name, and the domains each waiting identifier waits on, and
// the identifiers a queued fetch runs for.
func (t *Throttle) Status() (domains []DomainStatus, waiting map[string][]string, running map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	waiting, running = map[string][]string{}, map[string]bool{}
	for name, d := range t.domains {
		d.prune(now, t.o.Window)
		if len(d.order) == 0 && d.inFlight == 0 && len(d.ended) == 0 {
			continue
		}
		ds := DomainStatus{Domain: name, Waiting: d.waiting, InFlight: d.inFlight, InWindow: d.units + len(d.ended)}
		if d.timer != nil {
			ds.NextSlot = d.timerAt
		}
		domains = append(domains, ds)
		for id, q := range d.queued {
			if q.inProgress {
				running[id] = true
			} else {
				waiting[id] = append(waiting[id], name)
			}
		}
	}
	sort.Slice(domains, func(i, j int) bool { return domains[i].Domain < domains[j].Domain })
	for _, ds := range waiting {
		sort.Strings(ds)
	}
	return domains, waiting, running
}

// QueuedCount returns how many identifiers wait on domain (for tests).
func (t *Throttle) QueuedCount(domain string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.domains[domain]; ok {
		return len(d.order)
	}
	return 0
}
