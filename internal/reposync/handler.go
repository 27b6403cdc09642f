package reposync

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/filters"
)

// Outcome is what became of an event handed to the publisher.
type Outcome int

// Publish outcomes.
const (
	// Accepted: the own relay stored it (OK true).
	Accepted Outcome = iota + 1
	// Duplicate: the own relay already had it.
	Duplicate
	// Rejected: the own relay refused it (OK false, not duplicate).
	Rejected
	// Dropped: it was not acknowledged because the sidecar is stopping.
	Dropped
)

func (o Outcome) String() string {
	return [...]string{"unknown", "accepted", "duplicate", "rejected", "dropped"}[o]
}

// PublishFunc hands an event to the publisher; done is called exactly once
// with the outcome. It blocks while the publisher's queue is full.
type PublishFunc func(ctx context.Context, ev *nostr.Event, done func(Outcome, string)) error

// Purgatory is the engine's view of the purgatory: events that need git
// data go there instead of straight to the publisher.
type Purgatory interface {
	Needs(ev *nostr.Event) bool
	Add(ev *nostr.Event, onOwnRelay bool)
	AddAnnouncement(ev *nostr.Event)
}

// HandlerConfig bounds the shared event handler.
type HandlerConfig struct {
	// Workers verifying signatures; 0 means GOMAXPROCS.
	Workers int
	// QueueLen is the number of received events waiting for a worker;
	// receivers block when it is full.
	QueueLen      int
	MaxEventBytes int
	MaxEventTags  int
	// SeenMax bounds the dedupe set; SeenTTL is how long an id is
	// remembered at most (0: until evicted by size).
	SeenMax int
	SeenTTL time.Duration
	// RelayRate bounds the events per second one relay may hand to the
	// handler (0: unbounded); RelayBurst is how many it may hand at once
	// (0: one second's worth). RelayQueue bounds one relay's events
	// waiting in the shared queue (0: only QueueLen bounds them). A relay
	// over a bound waits in Handle; each wait counts in
	// ngit_sync_limit_hits_total{limit="relay_event_rate"|"relay_queue"}.
	RelayRate  int
	RelayBurst int
	RelayQueue int
	// RelayQueueBytes bounds the bytes (frame sizes) of one relay's events
	// waiting in the shared queue (0: unbounded); a relay over it waits in
	// Handle and counts as a "relay_queue" limit hit. One event is always
	// let in.
	RelayQueueBytes int
}

// Incoming is one event as received from a relay.
type Incoming struct {
	Event *nostr.Event
	// Size of the frame it came in (0 if unknown).
	Size  int
	Relay string

	release func() // frees the relay's queue slot once processed
}

// Handler is the shared event handler: every event from every subscription
// goes through Handle, which validates it, deduplicates it atomically and
// routes it to purgatory or the publisher. Outcomes feed the RejectedIndex
// and retry rejected events whose dependency was accepted.
type Handler struct {
	cfg      HandlerConfig
	log      *zap.Logger
	m        *metrics
	publish  PublishFunc
	purg     Purgatory
	rejected *RejectedIndex
	seen     *seenSet
	// onPresent is called for every event known to be on the own relay
	// (accepted, duplicate, or seen through the self-subscription).
	onPresent func(ev *nostr.Event)
	limits    *relayLimits

	in      chan Incoming
	retries chan *nostr.Event
	wg      sync.WaitGroup
}

// NewHandler builds a handler. purg may be nil (no git directory).
func NewHandler(cfg HandlerConfig, publish PublishFunc, purg Purgatory, rejected *RejectedIndex, m *metrics, log *zap.Logger) *Handler {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 4096
	}
	if cfg.SeenMax <= 0 {
		cfg.SeenMax = 2_000_000
	}
	limits := newRelayLimits(cfg.RelayRate, cfg.RelayBurst, cfg.RelayQueue, nil,
		m.limitHits.WithLabelValues("relay_event_rate"), m.limitHits.WithLabelValues("relay_queue"))
	limits.maxBytes = int64(cfg.RelayQueueBytes)
	return &Handler{
		cfg: cfg, log: log, m: m, publish: publish, purg: purg, rejected: rejected,
		limits:  limits,
		seen:    newSeenSet(cfg.SeenMax, cfg.SeenTTL, nil),
		in:      make(chan Incoming, cfg.QueueLen),
		retries: make(chan *nostr.Event, cfg.QueueLen),
	}
}

// Run starts the workers and blocks until ctx is done and they stopped.
func (h *Handler) Run(ctx context.Context) error {
	for i := 0; i < h.cfg.Workers; i++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case in := <-h.in:
					h.process(ctx, in)
				case ev := <-h.retries:
					h.route(ctx, ev)
				}
			}
		}()
	}
	<-ctx.Done()
	h.wg.Wait()
	return nil
}

// Handle queues ev for processing; it blocks while the queue is full or
// the relay is over its rate or queue bound, so a relay that floods is
// slowed down instead of growing memory or starving the others.
func (h *Handler) Handle(ctx context.Context, in Incoming) error {
	if in.Event == nil {
		return nil
	}
	// Events over a bound are dropped before they take a queue slot.
	if reason, err := h.bounds(in); err != nil {
		h.m.eventsInvalid.WithLabelValues(reason).Inc()
		h.log.Debug("dropped invalid event", zap.String("relay", in.Relay), zap.String("id", in.Event.ID), zap.Error(err))
		return nil
	}
	release, err := h.limits.admit(ctx, in.Relay, in.Size)
	if err != nil {
		return err
	}
	in.release = release
	select {
	case h.in <- in:
		return nil
	case <-ctx.Done():
		release()
		return ctx.Err()
	}
}

// MarkPresent records that ev is on the own relay (seen through the
// self-subscription); it will not be published again.
func (h *Handler) MarkPresent(ev *nostr.Event) {
	if id, ok := decodeID(ev.ID); ok {
		h.seen.Mark(id)
	}
}

// Seen tells whether an event id went through the handler or is known to
// be on the own relay.
func (h *Handler) Seen(id string) bool {
	b, ok := decodeID(id)
	return ok && h.seen.Has(b)
}

// bounds checks the size and tag count. Its error names the reason.
func (h *Handler) bounds(in Incoming) (string, error) {
	if h.cfg.MaxEventBytes > 0 && in.Size > h.cfg.MaxEventBytes {
		return "too_large", fmt.Errorf("event of %d bytes exceeds %d", in.Size, h.cfg.MaxEventBytes)
	}
	if h.cfg.MaxEventTags > 0 && len(in.Event.Tags) > h.cfg.MaxEventTags {
		return "too_many_tags", fmt.Errorf("event has %d tags, limit %d", len(in.Event.Tags), h.cfg.MaxEventTags)
	}
	return "", nil
}

// validate checks bounds, id and signature. Its error names the reason.
func (h *Handler) validate(in Incoming) (string, error) {
	ev := in.Event
	if reason, err := h.bounds(in); err != nil {
		return reason, err
	}
	if !ev.CheckID() {
		return "bad_id", fmt.Errorf("id does not match content")
	}
	ok, err := ev.CheckSignature()
	if err != nil || !ok {
		return "bad_signature", fmt.Errorf("signature does not verify")
	}
	return "", nil
}

func (h *Handler) process(ctx context.Context, in Incoming) {
	if in.release != nil {
		defer in.release()
	}
	if in.Event == nil {
		return
	}
	id, ok := decodeID(in.Event.ID)
	if !ok {
		h.m.eventsInvalid.WithLabelValues("bad_id").Inc()
		return
	}
	// Cheap check first: most events arrive from several relays. Only a
	// verified event is ever marked, so a forged copy cannot shadow it.
	if h.seen.Has(id) {
		return
	}
	if reason, err := h.validate(in); err != nil {
		h.m.eventsInvalid.WithLabelValues(reason).Inc()
		h.log.Debug("dropped invalid event", zap.String("relay", in.Relay), zap.String("id", in.Event.ID), zap.Error(err))
		return
	}
	if !h.seen.Mark(id) {
		return
	}
	h.route(ctx, in.Event)
}

// route sends a verified, deduplicated event on.
func (h *Handler) route(ctx context.Context, ev *nostr.Event) {
	if h.purg != nil && h.purg.Needs(ev) {
		h.purg.Add(ev, false)
		return
	}
	if err := h.publish(ctx, ev, func(o Outcome, reason string) { h.Settle(ev, o, reason) }); err != nil {
		h.Settle(ev, Dropped, err.Error())
	}
}

// Settle applies an outcome: bookkeeping, metrics, and retries of rejected
// events that waited for this one. Purgatory's publisher reports through
// it too.
func (h *Handler) Settle(ev *nostr.Event, o Outcome, reason string) {
	switch o {
	case Accepted, Duplicate:
		if o == Accepted {
			h.m.eventsSynced.Inc()
		} else {
			h.m.eventsDuplicate.Inc()
		}
		if h.onPresent != nil {
			h.onPresent(ev)
		}
		if ev.Kind == filters.KindRepoAnnouncement && h.purg != nil {
			h.purg.AddAnnouncement(ev)
		}
		h.dependencyAccepted(ev)
	case Rejected:
		h.m.eventsRejected.WithLabelValues(reasonLabel(reason)).Inc()
		if h.rejected.Add(ev) {
			// Its dependency was accepted while it was in flight.
			h.retry(ev)
			return
		}
		h.log.Debug("own relay rejected event", zap.String("id", ev.ID), zap.Int("kind", ev.Kind), zap.String("reason", reason))
	case Dropped:
		if id, ok := decodeID(ev.ID); ok {
			h.seen.Forget(id)
		}
	}
}

// dependencyAccepted retries the rejected events that referenced ev.
func (h *Handler) dependencyAccepted(ev *nostr.Event) {
	refs := []string{ev.ID}
	if ev.Kind == filters.KindRepoAnnouncement {
		if d := ev.Tags.GetD(); d != "" {
			refs = append(refs, RepoRef(ev.PubKey, d), anyOwnerRef(d))
		}
	}
	for _, ref := range refs {
		retry, forgotten := h.rejected.DependencyAccepted(ref)
		for _, id := range forgotten {
			if b, ok := decodeID(id); ok {
				h.seen.Forget(b)
			}
		}
		for _, r := range retry {
			h.retry(r)
		}
	}
}

// retry queues a previously rejected event for another publish. It never
// blocks (Settle runs on the publisher's goroutine); when the retry queue is
// full the event is forgotten instead, so the next sync fetches it again.
func (h *Handler) retry(ev *nostr.Event) {
	select {
	case h.retries <- ev:
	default:
		if id, ok := decodeID(ev.ID); ok {
			h.seen.Forget(id)
		}
	}
}
