// Package ingest is where every event from every relay enters: it
// validates it, dedupes it, routes it to purgatory or the publisher,
// settles the outcome and remembers rejections.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/publish"
)

// Publisher sends events to the own relay (*publish.Publisher).
type Publisher interface {
	// Submit queues ev; done is called exactly once with its result. It
	// blocks while the publisher's queue is full.
	Submit(ctx context.Context, ev *nostr.Event, done func(publish.Result)) error
	// Publish sends ev and waits for its result.
	Publish(ctx context.Context, ev *nostr.Event) (publish.Result, error)
}

// RawPublisher is a Publisher that can send an event as the bytes it
// arrived in (*publish.Publisher).
type RawPublisher interface {
	SubmitRaw(ctx context.Context, ev *nostr.Event, raw []byte, done func(publish.Result)) error
}

// Holder holds events that need git data until it is there
// (*purgatory.Purgatory): they go there instead of straight to the
// publisher, and come back through the release queue the holder was built
// with (Deps.Released). Add refuses events of repositories not hosted here
// with an error wrapping event.ErrNotHosted, and wraps event.ErrFull when
// it is full; ingest knows nothing else of the purgatory.
type Holder interface {
	Needs(ev *nostr.Event) bool
	Add(ev *nostr.Event, onOwnRelay bool) error
	AddAnnouncement(ev *nostr.Event)
}

// Present records what the own relay holds (*localindex.Index): AddID
// adds an event seen there, whose id the handler decoded already; fresh
// when the own relay has just accepted it as new.
type Present interface {
	AddID(id event.ID, ev *nostr.Event, fresh bool) error
}

// Deps are the handler's collaborators.
type Deps struct {
	Publisher Publisher
	// Holder is nil without a git directory.
	Holder Holder
	// Released is the queue the Holder hands the events it releases back
	// through (the wiring builds it first and gives it to both):
	// RunReleased publishes them and settles their outcome like any other.
	Released *event.Releases
	// Stored are told of every event the own relay answered it stored (an
	// OK true, new or a duplicate), before the event is recorded as
	// present: called from the publisher's goroutine, they must not block.
	Stored []func(*nostr.Event)
	// Present, when set, is told of every event known to be on the own
	// relay (accepted, duplicate, or seen through the self-subscription):
	// negentropy's local set (*localindex.Index).
	Present Present
	// Clock defaults to clock.Real{}.
	Clock    clock.Clock
	Log      *zap.Logger
	Registry prometheus.Registerer
}

// Incoming is one event as received from a relay (event.Incoming): its id
// is decoded once, by the relay's read loop or on entering Handle, and
// every stage after takes it from there. Raw, when set, is forwarded to
// the own relay as is when the publisher takes it (RawPublisher).
type Incoming = event.Incoming

// queued is an Incoming waiting for a worker, with the relay's queue slot
// it holds.
type queued struct {
	in      Incoming
	release func() // frees the relay's queue slot once processed
}

// idEvent is an event with its decoded id, queued to be routed again.
type idEvent struct {
	id event.ID
	ev *nostr.Event
}

// Handler is the shared event handler: every event from every subscription
// goes through Handle, which validates it, deduplicates it atomically and
// routes it to purgatory or the publisher. Outcomes feed the RejectedIndex
// and retry rejected events whose dependency was accepted.
type Handler struct {
	cfg      Config
	log      *zap.Logger
	m        *metrics
	pub      Publisher
	holder   Holder
	released *event.Releases
	rejected *RejectedIndex
	seen     *seenSet
	flying   *flights
	fresh    freshCounts // first copies, per relay (Fresh)
	invalid  invalidIDs  // ids of copies lately dropped as invalid (IDState)
	present  Present
	limits   *relayLimits
	held     *ownHeld
	clock    clock.Clock
	stored   []func(*nostr.Event) // Deps.Stored

	in      chan queued
	retries chan idEvent
	pending atomic.Int64 // see Pending
	wg      sync.WaitGroup
}

// New builds a handler; it registers its metrics with d.Registry.
func New(cfg Config, d Deps) (*Handler, error) {
	if d.Publisher == nil || d.Registry == nil {
		return nil, errors.New("ingest: Publisher and Registry are required")
	}
	if cfg.QueueLen <= 0 || cfg.SeenMax <= 0 {
		return nil, fmt.Errorf("ingest: QueueLen (%d) and SeenMax (%d) must be positive", cfg.QueueLen, cfg.SeenMax)
	}
	if cfg.OwnPurgatoryRecheck <= 0 {
		cfg.OwnPurgatoryRecheck = DefaultOwnHeldRecheck
	}
	if cfg.VerifyWorkers <= 0 {
		cfg.VerifyWorkers = runtime.GOMAXPROCS(0)
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	m, err := newMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	limits := newRelayLimits(cfg.RelayRate, cfg.RelayBurst, cfg.RelayQueue, d.Clock,
		m.limitHits.WithLabelValues("relay_event_rate"), m.limitHits.WithLabelValues("relay_queue"))
	limits.maxBytes = int64(cfg.RelayQueueBytes)
	seen := newSeenSet(cfg.SeenMax, cfg.SeenTTL, d.Clock.Now)
	if p, ok := d.Present.(presentIDs); ok {
		seen.present = p
	}
	return &Handler{
		cfg: cfg, log: d.Log, m: m, pub: d.Publisher, holder: d.Holder, released: d.Released,
		stored:   slices.Clone(d.Stored),
		rejected: NewRejectedIndex(cfg.Rejected, d.Clock.Now),
		present:  d.Present,
		limits:   limits,
		held:     newOwnHeld(cfg.SeenMax),
		clock:    d.Clock,
		seen:     seen,
		flying:   newFlights(),
		in:       make(chan queued, cfg.QueueLen),
		retries:  make(chan idEvent, cfg.QueueLen),
	}, nil
}

// Rejected is the RejectedIndex.
func (h *Handler) Rejected() *RejectedIndex { return h.rejected }

// AppendRejected adds the RejectedIndex's ids to a negentropy local set
// (a localindex.Source): we do not want them again.
func (h *Handler) AppendRejected(dst []neg.Item, _ nostr.Filter) []neg.Item {
	h.rejected.Items(func(createdAt int64, id event.ID) {
		dst = append(dst, neg.Item{CreatedAt: nostr.Timestamp(createdAt), ID: id})
	})
	return dst
}

// Invalid counts an event dropped before it reached the handler (for
// example one that does not match the subscription it came on).
func (h *Handler) Invalid(reason string) { h.m.eventsInvalid.WithLabelValues(reason).Inc() }

// LimitHit counts a configured bound refusing input.
func (h *Handler) LimitHit(limit string) { h.m.limitHits.WithLabelValues(limit).Inc() }

// Run starts the workers and blocks until ctx is done and they stopped.
func (h *Handler) Run(ctx context.Context) error {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.runHeldRecheck(ctx)
	}()
	for i := 0; i < h.cfg.VerifyWorkers; i++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case q := <-h.in:
					h.processQueued(ctx, q)
					h.pending.Add(-1)
				case r := <-h.retries:
					h.route(ctx, r)
					h.pending.Add(-1)
				}
			}
		}()
	}
	<-ctx.Done()
	h.wg.Wait()
	return nil
}

// Handle queues ev for processing; it blocks while the queue is full or
// the relay is over its queue bound, or, for a copy of an event seen
// before, over its rate, so a relay that floods is slowed down instead of
// growing memory or starving the others, and a first sync runs at the
// pace of the pipeline.
func (h *Handler) Handle(ctx context.Context, in Incoming) error {
	if in.Event == nil {
		return nil
	}
	in = in.WithID() // a no-op when the relay's read loop decoded it
	// Events over a bound are dropped before they take a queue slot.
	if reason, err := h.bounds(in); err != nil {
		h.m.eventsInvalid.WithLabelValues(reason).Inc()
		h.noteInvalid(&in)
		h.log.Debug("dropped invalid event", zap.String("relay", in.Relay), zap.String("id", in.Event.ID), zap.Error(err))
		return nil
	}
	// The sync asked for this event (what arrives unasked or matching no
	// filter of ours never gets here) and, when the handler has not seen
	// its id, it is new work: it is never paced, only the relay's queue
	// bounds it. Copies of events the handler has seen are what a relay
	// repeats or replays: those take a rate token.
	id, ok := in.ID()
	paced := !ok || h.seen.Has(id)
	release, err := h.limits.admit(ctx, in.Relay, in.Size, paced)
	if err != nil {
		return err
	}
	h.pending.Add(1)
	select {
	case h.in <- queued{in: in, release: release}:
		return nil
	case <-ctx.Done():
		h.pending.Add(-1)
		release()
		return ctx.Err()
	}
}

// OnOwnRelay records an event the own relay holds (read from it, or seen
// through the self-subscription): it will not be published again, and the
// purgatory learns of announcements and of states and PRs others put there.
func (h *Handler) OnOwnRelay(ev *nostr.Event) { h.onOwnRelay(ev, false) }

// OnOwnRelayLive is OnOwnRelay for an event the own relay's live
// self-subscription delivered after its EOSE. A relay broadcasts a regular
// event only when it has just stored it (a duplicate is not broadcast;
// khatru does broadcast a replaceable event it did not store, so those are
// left out). A regular event the handler knows (it sent it, or holds it,
// or has it queued) is then new on the own relay, as the OK of ours will
// say: it is indexed as new (Present.AddNew) at once. The echo can
// overtake the OK by longer than a self-subscription batch takes to be
// applied on a loaded machine, and the own-relay fill would read the
// Layer 3 of a root the relay has just stored. A wrong mark costs a
// download, never an event (localindex.Index.AddNew).
func (h *Handler) OnOwnRelayLive(ev *nostr.Event) { h.onOwnRelay(ev, true) }

func (h *Handler) onOwnRelay(ev *nostr.Event, live bool) {
	id, ok := event.DecodeID(ev.ID)
	if !ok {
		return
	}
	// An event that went through the handler was published by us (after
	// the purgatory released it, for states and PRs): its git data is
	// here. Only events others put on the own relay need checking.
	ours := h.seen.Has(id)
	h.notHeld(id)
	h.learnPresent(ev, id, live && ours && nostr.IsRegularKind(ev.Kind))
	if h.holder != nil && ev.Kind == nip34.KindRepoAnnouncement {
		// Before the retries below: they ask the purgatory whether the
		// repository is hosted.
		h.holder.AddAnnouncement(ev)
	}
	if !ours {
		// Someone else put it there (our own publishes settled this on
		// their OK): events the own relay refused for want of it may be
		// accepted now.
		h.dependencyAccepted(ev)
	}
	if h.holder == nil {
		return
	}
	switch ev.Kind {
	case nip34.KindRepoState, nip34.KindPullRequest, nip34.KindPRUpdate:
		if !ours {
			h.hold(id, ev, true)
		}
	}
}

// MarkPresent records that ev is on the own relay; it will not be
// published again.
func (h *Handler) MarkPresent(ev *nostr.Event) {
	if id, ok := event.DecodeID(ev.ID); ok {
		h.seen.Mark(id)
	}
}

// Seen tells whether an event id went through the handler or is known to
// be on the own relay.
func (h *Handler) Seen(id string) bool {
	b, ok := event.DecodeID(id)
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

// validate checks bounds and the id hash (the signature is the own
// relay's to check, or checkSig's). Its error names the reason.
func (h *Handler) validate(in Incoming) (string, error) {
	if reason, err := h.bounds(in); err != nil {
		return reason, err
	}
	if !checkID(in.Event) {
		return "bad_id", fmt.Errorf("id does not match content")
	}
	return "", nil
}

// processQueued processes q, then frees the relay's queue slot it held.
func (h *Handler) processQueued(ctx context.Context, q queued) {
	if q.release != nil {
		defer q.release()
	}
	h.process(ctx, q.in)
}

func (h *Handler) process(ctx context.Context, in Incoming) {
	if in.Event == nil {
		return
	}
	ev := in.Event
	id, ok := in.ID()
	if !ok {
		h.m.eventsInvalid.WithLabelValues("bad_id").Inc()
		return
	}
	// Cheap check first: most events arrive from several relays.
	if h.flying.duplicate(h.seen, id, ev.Sig) {
		h.m.eventsSeenAgain.Inc()
		return
	}
	if reason, err := h.validate(in); err != nil {
		h.m.eventsInvalid.WithLabelValues(reason).Inc()
		h.noteInvalid(&in)
		h.log.Debug("dropped invalid event", zap.String("relay", in.Relay), zap.String("id", ev.ID), zap.Error(err))
		return
	}
	if h.holder != nil && h.holder.Needs(ev) {
		// The purgatory acts on it alone (git fetches, holding it for
		// hours): verified before it is marked, so a forged copy never
		// shadows the real one.
		if h.seen.Has(id) {
			h.m.eventsSeenAgain.Inc()
			return
		}
		if !h.checkSig(ev, in.Relay) || !h.seen.Mark(id) {
			return
		}
		h.fresh.add(in.Relay)
		h.hold(id, ev, false)
		return
	}
	switch h.flying.claim(h.seen, id, ev.Sig) {
	case claimDrop:
		h.m.eventsSeenAgain.Inc()
		return
	case claimSend:
		h.fresh.add(in.Relay)
	case claimVerify:
		// A second, different copy of an id in flight: one of the two is
		// forged. Verified, it waits for the first copy's outcome and is
		// sent if that is refused, so a forged first copy cannot keep the
		// real event out.
		if !h.checkSig(ev, in.Relay) || !h.flying.claimVerified(h.seen, id, ev) {
			return
		}
	}
	h.submit(ctx, id, ev, in.Raw)
}

// route sends a verified, deduplicated event on (a retry from the
// RejectedIndex's hot cache).
func (h *Handler) route(ctx context.Context, r idEvent) {
	if h.holder != nil && h.holder.Needs(r.ev) {
		h.hold(r.id, r.ev, false)
		return
	}
	h.submit(ctx, r.id, r.ev, nil)
}

// hold hands ev (id is its decoded id) to the purgatory.
func (h *Handler) hold(id event.ID, ev *nostr.Event, onOwnRelay bool) {
	err := h.holder.Add(ev, onOwnRelay)
	switch {
	case err == nil:
		return
	case errors.Is(err, event.ErrNotHosted):
		// Not a repository this service hosts (or not yet: its
		// announcement may still be on its way). It costs no git command
		// and no publish: it waits in the RejectedIndex like an event the
		// own relay refused, and comes back when an announcement of its
		// repository is accepted.
		if h.rejected.addID(id, ev) {
			h.retry(id, ev) // an announcement was accepted meanwhile
		}
	case errors.Is(err, event.ErrFull):
		// Not lost: the next sync fetches it again.
		h.seen.Forget(id)
	}
	h.log.Debug("purgatory refused event", zap.String("id", ev.ID), zap.Error(err))
}

// RunReleased publishes the events the Holder releases (Deps.Released)
// until ctx is done, each under the holder's context and on a goroutine
// of its own, as the holder waits for each answer: run it for as long as
// the holder runs. Without a release queue it only waits for ctx.
func (h *Handler) RunReleased(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var c <-chan event.Release
	if h.released != nil {
		c = h.released.C()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-c:
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.Done(h.publishReleased(r.Context(), r.Event))
			}()
		}
	}
}

// publishReleased sends an event the purgatory released to the own
// relay, waits for the answer and settles it like any other: nil when the
// own relay has the event.
func (h *Handler) publishReleased(ctx context.Context, ev *nostr.Event) error {
	r, err := h.pub.Publish(ctx, ev)
	if err != nil {
		return err
	}
	id, idOK := event.IDOf(ev)
	h.settle(id, idOK, ev, r)
	if !r.Present() {
		return fmt.Errorf("own relay refused released event: %s", reason(r))
	}
	return nil
}

// reason is the relay's OK message, or the error of a dropped event.
func reason(r publish.Result) string {
	if r.Err != nil && r.Reason == "" {
		return r.Err.Error()
	}
	return r.Reason
}

// Settle applies a publish result: bookkeeping, metrics, and retries of
// rejected events that waited for this one.
func (h *Handler) Settle(ev *nostr.Event, r publish.Result) {
	id, idOK := event.IDOf(ev)
	h.settle(id, idOK, ev, r)
}

// settle is the one place a publish outcome fans out from: the flight and
// the dedupe mark, the own relay's held set, the metrics, the stored
// listeners (Deps.Stored), the local index (Present), the holder's
// announcements, the RejectedIndex and the retries the outcome frees. id
// is ev's id as decoded on arrival; idOK is false when ev's id is not
// valid hex (only an event from outside the handler's own paths).
func (h *Handler) settle(id event.ID, idOK bool, ev *nostr.Event, r publish.Result) {
	// Not a valid event: the own relay's judgement, or ours before it
	// could enter the RejectedIndex (decided while its flight still
	// stands, so no honest copy is dropped meanwhile).
	invalid := r.Outcome == publish.Rejected &&
		(refusedInvalid(r) || (!(idOK && h.flying.verified(id, ev.Sig)) && !verifySig(ev)))
	var alt *nostr.Event
	if idOK {
		alt = h.flying.settle(h.seen, id, ev.Sig, r.Present(), invalid)
	}
	if invalid {
		// Dropped, and its id forgotten (in settle) so that an honest copy
		// can still come — or the verified copy that waited is sent now.
		h.m.eventsInvalid.WithLabelValues(invalidLabel(ev, r)).Inc()
		h.log.Debug("own relay refused invalid event", zap.String("id", ev.ID), zap.String("reason", r.Reason))
		if alt != nil && !h.retry(id, alt) {
			h.flying.abandon(h.seen, id, true)
			alt = nil
		}
		if idOK && alt == nil {
			// Nobody delivers it unless asked again: a fetch waiting for
			// this copy asks its own relay at once (IDInvalid).
			h.invalid.add(id)
		}
		return
	}
	if alt != nil {
		// Refused for another reason although valid: the other copy
		// would be too (the id fixes the content).
		h.flying.abandon(h.seen, id, false)
	}
	switch r.Outcome {
	case publish.Held:
		// Accepted into the own relay's GRASP purgatory: not present
		// until the relay serves it.
		if idOK {
			h.onHeld(id, ev)
		}
	case publish.Accepted, publish.Duplicate:
		if idOK {
			h.notHeld(id)
		}
		if r.Outcome == publish.Accepted {
			h.m.eventsSynced.Inc()
		} else {
			h.m.eventsDuplicate.Inc()
		}
		for _, stored := range h.stored {
			stored(ev)
		}
		if idOK && h.present != nil {
			h.learnPresent(ev, id, r.Outcome == publish.Accepted)
		}
		if ev.Kind == nip34.KindRepoAnnouncement && h.holder != nil {
			h.holder.AddAnnouncement(ev)
		}
		h.dependencyAccepted(ev)
	case publish.Rejected:
		if idOK {
			h.notHeld(id)
		}
		h.m.eventsRejected.WithLabelValues(reasonLabel(r.Reason)).Inc()
		if idOK && h.rejected.addID(id, ev) {
			// Its dependency was accepted while it was in flight.
			h.retry(id, ev)
			return
		}
		h.log.Debug("own relay rejected event", zap.String("id", ev.ID), zap.Int("kind", ev.Kind), zap.String("reason", r.Reason))
	case publish.Dropped:
		if idOK {
			h.notHeld(id)
			h.seen.Forget(id)
		}
	}
}
