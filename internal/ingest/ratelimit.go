package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// relayLimits keeps one relay from starving the others in the shared
// handler: each relay has a token bucket (Rate events per second, Burst
// at once) and may have at most Queue events, and at most maxBytes bytes of
// events, waiting in the shared queue (one event is always let in, however
// large: events over the handler's size bound never get here).
// A relay over either bound waits in Handle, so its reader stops reading
// and the relay is slowed down by its own TCP window; a relay that stays
// blocked longer than the pong timeout is disconnected by its connection.
type relayLimits struct {
	rate     float64
	burst    float64
	queue    int
	maxBytes int64 // 0: no byte bound
	clock    clock.Clock

	rateHits  prometheus.Counter
	queueHits prometheus.Counter

	mu     sync.Mutex
	relays map[string]*relayLimit
}

type relayLimit struct {
	tokens float64
	last   time.Time
	slots  chan struct{}
	bytes  int64         // of this relay's events in the shared queue
	freed  chan struct{} // closed (and dropped) when bytes go down
}

// sweepAt is the number of relays remembered before idle ones are swept.
const sweepAt = 256

func newRelayLimits(rate, burst, queue int, clk clock.Clock, rateHits, queueHits prometheus.Counter) *relayLimits {
	if burst <= 0 {
		burst = max(rate, 1)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &relayLimits{
		rate: float64(rate), burst: float64(burst), queue: queue, clock: clk,
		rateHits: rateHits, queueHits: queueHits,
		relays: map[string]*relayLimit{},
	}
}

// get returns the relay's state; l.mu is held.
func (l *relayLimits) get(relay string, now time.Time) *relayLimit {
	r := l.relays[relay]
	if r != nil {
		return r
	}
	if len(l.relays) >= sweepAt {
		l.sweep(now)
	}
	r = &relayLimit{tokens: l.burst, last: now}
	if l.queue > 0 {
		r.slots = make(chan struct{}, l.queue)
	}
	l.relays[relay] = r
	return r
}

// sweep forgets relays that are idle: a full bucket and nothing queued.
func (l *relayLimits) sweep(now time.Time) {
	for url, r := range l.relays {
		l.refill(r, now)
		if r.tokens >= l.burst && (r.slots == nil || len(r.slots) == 0) && r.bytes == 0 {
			delete(l.relays, url)
		}
	}
}

func (l *relayLimits) refill(r *relayLimit, now time.Time) {
	if d := now.Sub(r.last); d > 0 {
		r.tokens = min(l.burst, r.tokens+d.Seconds()*l.rate)
		r.last = now
	}
}

// reserve takes one token from relay's bucket and returns how long the
// caller must wait before using it (0 when a token was available). Tokens
// may go negative: waiting callers are served in order.
func (l *relayLimits) reserve(relay string) time.Duration {
	if l.rate <= 0 {
		return 0
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.get(relay, now)
	l.refill(r, now)
	r.tokens--
	if r.tokens >= 0 {
		return 0
	}
	return time.Duration(-r.tokens / l.rate * float64(time.Second))
}

// admit waits until relay may hand over one more event of size bytes:
// a queue slot and room for its bytes, and, when paced, a rate token. The
// returned release must be called once the event left the shared queue.
func (l *relayLimits) admit(ctx context.Context, relay string, size int, paced bool) (release func(), err error) {
	var d time.Duration
	if paced {
		d = l.reserve(relay)
	}
	if d > 0 {
		if l.rateHits != nil {
			l.rateHits.Inc()
		}
		t := l.clock.NewTimer(d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	releaseSlot := func() {}
	if l.queue > 0 {
		l.mu.Lock()
		slots := l.get(relay, l.clock.Now()).slots
		l.mu.Unlock()
		select {
		case slots <- struct{}{}:
		default:
			if l.queueHits != nil {
				l.queueHits.Inc()
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		releaseSlot = func() { <-slots }
	}
	if l.maxBytes <= 0 {
		return releaseSlot, nil
	}
	n := int64(max(size, 0))
	counted := false
	for {
		l.mu.Lock()
		r := l.get(relay, l.clock.Now())
		if r.bytes == 0 || r.bytes+n <= l.maxBytes {
			r.bytes += n
			l.mu.Unlock()
			break
		}
		if r.freed == nil {
			r.freed = make(chan struct{})
		}
		freed := r.freed
		l.mu.Unlock()
		if !counted && l.queueHits != nil {
			l.queueHits.Inc()
			counted = true
		}
		select {
		case <-freed:
		case <-ctx.Done():
			releaseSlot()
			return nil, ctx.Err()
		}
	}
	return func() {
		l.mu.Lock()
		r := l.get(relay, l.clock.Now())
		r.bytes -= n
		if r.freed != nil {
			close(r.freed)
			r.freed = nil
		}
		l.mu.Unlock()
		releaseSlot()
	}, nil
}
