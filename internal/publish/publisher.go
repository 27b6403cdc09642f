package publish

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Sentinel errors.
var (
	// ErrStopped: the publisher's Run has ended (or ends before the event
	// was acknowledged).
	ErrStopped = errors.New("publisher stopped")
	// ErrAlreadyRunning is returned by a second call of Run.
	ErrAlreadyRunning = errors.New("publisher already running")
	// ErrInvalidEvent is returned by Submit for an event without a
	// well-formed id (OK answers are matched by id).
	ErrInvalidEvent = errors.New("event has no valid id")
	// ErrMetrics wraps a failure to register the publisher's metrics.
	ErrMetrics = errors.New("register publisher metrics")
)

// Dialer opens a new connection to the own relay; ctx bounds the attempt.
type Dialer func(ctx context.Context) (*relay.Conn, error)

// Signer signs a NIP-42 AUTH event (sets PubKey, ID and Sig).
type Signer func(*nostr.Event) error

// Stats is a snapshot of the publisher's state and counters.
type Stats struct {
	// Queued are submissions waiting to be sent (or sent again).
	Queued int
	// InFlight are EVENTs awaiting their OK.
	InFlight int
	// Counters of outcomes, and of EVENTs queued to be sent again.
	Accepted, Duplicates, Rejected, Retries uint64
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

type submission struct {
	ev   *nostr.Event
	raw  []byte // ev as it arrived, sent as is when set
	done func(Result)
	size int64 // bytes taken from Publisher.bytes
}

// Publisher publishes events into the own relay over its own connection. It
// is safe for concurrent use; Run drives it.
type Publisher struct {
	cfg  Config
	dial Dialer
	sign Signer
	log  *zap.Logger
	m    *metrics
	// clock times OKs, holds, pacing and redials.
	clock clock.Clock
	// retry paces redials and rate-limit holds.
	retry backoff.Policy

	// slots holds one token per submission not yet answered (QueueSize).
	slots chan struct{}
	// bytes holds the bytes of the submissions not yet answered
	// (QueueBytes; nil: no byte bound).
	bytes *semaphore.Weighted
	// wake tells the loop that incoming has grown.
	wake chan struct{}
	// stopped is closed when Run ends.
	stopped chan struct{}

	mu          sync.Mutex
	state       int
	incoming    []submission
	outstanding int           // submissions without outcome
	idle        chan struct{} // closed while outstanding == 0
	dropped     bool          // Run ended with submissions unanswered

	connected                               atomic.Bool
	queued, inFlight                        atomic.Int64
	accepted, duplicates, rejected, retries atomic.Uint64
}

// Option changes a Publisher built by New.
type Option func(*Publisher)

// WithClock makes the publisher time OKs, holds, pacing and redials on c
// (clock.Real{} by default).
func WithClock(c clock.Clock) Option {
	return func(p *Publisher) {
		if c != nil {
			p.clock = c
		}
	}
}

// New returns a Publisher; call Run to start it. sign may be nil when no
// NIP-42 key is configured (auth-required answers are then Rejected). log
// and reg may be nil; log is used as given (the caller names it).
func New(cfg Config, dial Dialer, sign Signer, log *zap.Logger, reg prometheus.Registerer, opts ...Option) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dial == nil {
		return nil, errors.New("publish: nil dialer")
	}
	if log == nil {
		log = zap.NewNop()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	idle := make(chan struct{})
	close(idle)
	var bytes *semaphore.Weighted
	if cfg.QueueBytes > 0 {
		bytes = semaphore.NewWeighted(int64(cfg.QueueBytes))
	}
	p := &Publisher{
		bytes:   bytes,
		cfg:     cfg,
		dial:    dial,
		sign:    sign,
		log:     log,
		m:       m,
		clock:   clock.Real{},
		retry:   backoff.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, Jitter: 0.5, Shorten: true},
		slots:   make(chan struct{}, cfg.QueueSize),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		idle:    idle,
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// Submit hands ev to the publisher. It blocks only while QueueSize
// submissions are unanswered (backpressure), honouring ctx. Once Submit has
// returned nil, done is called exactly once with the event's outcome, from a
// publisher goroutine: it must not block long, nor call Submit, Publish or
// Flush (the publisher waits for it). done may be nil. ev must not be
// modified afterwards. Submitting an event that is still queued or in
// flight does not send it again: both callers get its outcome.
func (p *Publisher) Submit(ctx context.Context, ev *nostr.Event, done func(Result)) error {
	return p.SubmitRaw(ctx, ev, nil, done)
}

// SubmitRaw is Submit for an event that arrived from another relay: raw is
// its JSON object as it arrived (relay.SubMsg.Raw), sent in the EVENT
// message instead of re-encoding ev, which gives the id and routing. raw
// nil is Submit; raw must not be modified afterwards.
func (p *Publisher) SubmitRaw(ctx context.Context, ev *nostr.Event, raw []byte, done func(Result)) error {
	if ev == nil || len(ev.ID) != 64 {
		return ErrInvalidEvent
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stopped:
		return ErrStopped
	}
	size, err := p.takeBytes(ctx, ev, raw)
	if err != nil {
		<-p.slots
		return err
	}
	p.mu.Lock()
	if p.state == stateStopped {
		p.mu.Unlock()
		p.giveBytes(size)
		<-p.slots
		return ErrStopped
	}
	p.incoming = append(p.incoming, submission{ev: ev, raw: raw, done: done, size: size})
	if p.outstanding == 0 {
		p.idle = make(chan struct{})
	}
	p.outstanding++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

// Publish submits ev and waits for its outcome. A Dropped outcome comes with
// its error. When ctx ends first, Publish returns ctx's error and the event
// stays with the publisher.
func (p *Publisher) Publish(ctx context.Context, ev *nostr.Event) (Result, error) {
	ch := make(chan Result, 1)
	if err := p.Submit(ctx, ev, func(r Result) { ch <- r }); err != nil {
		return Result{}, err
	}
	select {
	case r := <-ch:
		if r.Outcome == Dropped {
			return r, r.Err
		}
		return r, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Flush waits until every submission has its outcome. It returns ctx's error
// when ctx ends first and ErrStopped when Run ended with submissions left
// (they were reported Dropped).
func (p *Publisher) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		n, idle, dropped := p.outstanding, p.idle, p.dropped
		p.mu.Unlock()
		if dropped {
			return ErrStopped
		}
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stopped:
			return ErrStopped
		}
	}
}

// Connected reports whether the publisher has a connection to the own relay.
func (p *Publisher) Connected() bool { return p.connected.Load() }

// Stats returns a snapshot of the publisher's state and counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	queued := len(p.incoming) + int(p.queued.Load())
	p.mu.Unlock()
	return Stats{
		Queued:     queued,
		InFlight:   int(p.inFlight.Load()),
		Accepted:   p.accepted.Load(),
		Duplicates: p.duplicates.Load(),
		Rejected:   p.rejected.Load(),
		Retries:    p.retries.Load(),
	}
}

// Run connects to the own relay and publishes until ctx ends; then it closes
// the connection and reports every submission still unanswered as Dropped
// with ErrStopped. For a graceful stop, stop submitting, call Flush with a
// deadline, then cancel ctx. Run returns nil after ctx ends; it can be
// called once.
func (p *Publisher) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.state != stateNew {
		p.mu.Unlock()
		return ErrAlreadyRunning
	}
	p.state = stateRunning
	p.mu.Unlock()

	r := newRunner(ctx, p)
	r.loop()
	r.shutdown()
	return nil
}

// takeIncoming returns the submissions received since the last call.
func (p *Publisher) takeIncoming(buf []submission) []submission {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.incoming
	p.incoming = buf[:0]
	// count them as queued until the loop publishes exact gauges, so Stats
	// never misses them in between
	p.queued.Add(int64(len(in)))
	return in
}

// takeBytes waits until the bytes of a submission of ev (raw, or ev's
// encoding) are free under QueueBytes and takes them: at most QueueBytes,
// so one submission always fits. Shutdown answers every submission, so a
// waiter is never left behind by a stopped publisher.
func (p *Publisher) takeBytes(ctx context.Context, ev *nostr.Event, raw []byte) (int64, error) {
	if p.bytes == nil {
		return 0, nil
	}
	n := int64(len(raw))
	if raw == nil {
		n = int64(encodedSize(ev))
	}
	n = max(1, min(n, int64(p.cfg.QueueBytes)))
	if err := p.bytes.Acquire(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

// giveBytes gives back what takeBytes took.
func (p *Publisher) giveBytes(n int64) {
	if p.bytes != nil && n > 0 {
		p.bytes.Release(n)
	}
}

// encodedSize is about the length of ev's JSON: its fields and tags, and
// room for the keys, quotes and escapes.
func encodedSize(ev *nostr.Event) int {
	n := 96 + len(ev.ID) + len(ev.PubKey) + len(ev.Sig) + len(ev.Content) + len(ev.Content)/8
	for _, t := range ev.Tags {
		n += 4
		for _, v := range t {
			n += len(v) + 3
		}
	}
	return n
}

// finish records that n submissions got their outcome and gives back
// their bytes.
func (p *Publisher) finish(n int, bytes int64) {
	p.giveBytes(bytes)
	p.mu.Lock()
	p.outstanding -= n
	if p.outstanding == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	for range n {
		<-p.slots
	}
}

func (p *Publisher) count(o Outcome) {
	switch o {
	case Accepted:
		p.accepted.Add(1)
	case Duplicate:
		p.duplicates.Add(1)
	case Rejected:
		p.rejected.Add(1)
	case Held:
	default:
		return
	}
	p.m.results[o].Inc()
}

func (p *Publisher) countRetry(reason string) {
	p.retries.Add(1)
	p.m.retries[reason].Inc()
}

func (p *Publisher) setConnected(up bool) {
	p.connected.Store(up)
	if up {
		p.m.connected.Set(1)
	} else {
		p.m.connected.Set(0)
	}
}
