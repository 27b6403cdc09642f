// Package purgatory holds repository state events (kind 30618), pull
// requests (1618) and PR updates (1619) until the git objects they name exist
// in the GRASP git directory, fetches those objects from the repositories'
// clone URLs with git, and releases each event as soon as its data is there:
// objects copied to every authorised owner repository, refs aligned, event
// published to the own relay.
//
// Syncing is per identifier (the repository's d tag): events arriving in a
// burst share one fetch round, attempts back off, and git requests are
// throttled per domain. See docs/ARCHITECTURE.md, "Purgatory".
package purgatory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/throttle"
)

// Event kinds the purgatory holds or reads.
const (
	KindAnnouncement = 30617
	KindState        = 30618
	KindPR           = 1618
	KindPRUpdate     = 1619
)

// Sentinel errors of Add.
var (
	// ErrNotHeld: the event's kind does not go through purgatory.
	ErrNotHeld = errors.New("purgatory: kind not held")
	// ErrDisabled: no git directory is configured.
	ErrDisabled = errors.New("purgatory: disabled (no git directory)")
	// ErrInvalidEvent: a tag the purgatory relies on is missing or malformed.
	ErrInvalidEvent = errors.New("purgatory: invalid event")
	// ErrFull: MaxEntries events are held already (event.ErrFull, which
	// ingest acts on without importing this package).
	ErrFull = event.ErrFull
	// ErrNotHosted: no accepted announcement of a repository the event
	// belongs to lists this service (GRASP-01); the event is not held
	// (event.ErrNotHosted).
	ErrNotHosted = event.ErrNotHosted
	// ErrStale: a newer state event from the same author is already known;
	// the event must not be published.
	ErrStale = errors.New("purgatory: newer state from this author known")
)

// Publisher sends a released event to the own relay and blocks until the
// relay accepted it (nil, also for "duplicate:") or refused it (error). An
// event whose publish fails stays held and is retried until it expires.
// The wiring passes an *event.Releases, which ingest reads: released
// events go back through ingest's queue, and the purgatory never calls
// into ingest.
type Publisher interface {
	Publish(ctx context.Context, ev *nostr.Event) error
}

// Held is an event id the purgatory holds, with its created_at (negentropy
// counts these as "have").
type Held struct {
	ID        string
	CreatedAt nostr.Timestamp
}

// Stats is a snapshot of the purgatory's size.
type Stats struct {
	States        int
	PRs           int
	QueueSize     int
	Announcements int
}

// Events returns the number of held events.
func (s Stats) Events() int { return s.States + s.PRs }

// Options are the collaborators of a Purgatory. Publisher is required.
type Options struct {
	Publisher Publisher
	// Logger defaults to zap.NewNop(). It is used as given: the caller
	// names it (the sidecar: "purgatory").
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Git runs git; defaults to gitx.NewExec with the configured timeout.
	Git gitx.Runner
	// Resolver checks clone URL hosts; defaults to net.DefaultResolver.
	Resolver gitx.Resolver
	// SyncContext replaces the git-directory implementation (unit tests).
	SyncContext SyncContext
	// CheckCloneURL, when set, screens the clone URLs of every event and
	// announcement taken in (except those on OwnDomain) as they arrive, so
	// that a refused one is reported once with its reason; the git runner
	// must refuse them again should one ever be tried.
	CheckCloneURL func(url string) error
	// ResolveNostr, when set, resolves a nostr:// clone URL (never handed
	// to git) to the clone URLs of the repository it names — another
	// owner's fork, say (NostrResolver.Resolve). Without it such URLs are
	// only resolved through announcements the purgatory holds.
	ResolveNostr func(ctx context.Context, u nip34.NostrURL) ([]string, error)
}

// Purgatory holds events until their git data is present. Create with New,
// feed with AddAnnouncement and Add, drive with Run.
type Purgatory struct {
	cfg   Config
	log   *zap.Logger
	clock clock.Clock
	pub   Publisher
	git   gitx.Runner
	res   gitx.Resolver
	check func(url string) error
	// resolveNostr: Options.ResolveNostr.
	resolveNostr func(ctx context.Context, u nip34.NostrURL) ([]string, error)
	own          string // OwnDomain, normalized
	m            *metrics
	sc           SyncContext
	// enabled: a git directory (or a replacement SyncContext) is configured.
	enabled bool
	sync    *syncer
	th      *throttle.Throttle

	wake chan struct{}

	// gen counts intakes and removals (Generation).
	gen    atomic.Uint64
	mu     sync.Mutex
	byID   map[string]*entry
	states map[string]map[string]*entry // identifier → author → newest state
	prs    map[string]map[string]*entry // identifier → event id → PR / update
	anns   map[string]map[string]*announcement
	nAnns  int
	latest map[string]stamp // author + "/" + identifier → newest state known on the own relay or released
	queue  *syncQueue
	// lastExpiry is when pass last looked for expired entries.
	lastExpiry time.Time
	// tally counts releases, creations and drops for the next summary
	// line, logged by pass when summaryEvery has passed since lastSummary.
	tally        tally
	lastSummary  time.Time
	summaryEvery time.Duration
	runCtx       context.Context
	stopping     bool
	wg           sync.WaitGroup

	identMu   sync.Mutex
	identLock map[string]*identLock
	initMu    sync.Mutex
}

type identLock struct {
	mu   sync.Mutex
	refs int
}

// New builds a Purgatory. The configuration is validated.
func New(cfg Config, opts Options) (*Purgatory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Publisher == nil && opts.SyncContext == nil {
		return nil, errors.New("purgatory: Options.Publisher is required")
	}
	p := &Purgatory{
		cfg:          cfg,
		log:          opts.Logger,
		clock:        opts.Clock,
		pub:          opts.Publisher,
		git:          opts.Git,
		res:          opts.Resolver,
		check:        opts.CheckCloneURL,
		resolveNostr: opts.ResolveNostr,
		own:          gitx.NormalizeDomain("", cfg.OwnDomain),
		wake:         make(chan struct{}, 1),
		byID:         map[string]*entry{},
		states:       map[string]map[string]*entry{},
		prs:          map[string]map[string]*entry{},
		anns:         map[string]map[string]*announcement{},
		latest:       map[string]stamp{},
		identLock:    map[string]*identLock{},
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if p.clock == nil {
		p.clock = clock.Real{}
	}
	p.lastSummary = p.clock.Now()
	p.summaryEvery = cfg.SummaryInterval
	if p.git == nil {
		e := gitx.NewExec(cfg.GitTimeout)
		e.OutputCap = cfg.GitOutputCap
		p.git = e
	}
	if p.res == nil {
		p.res = defaultResolver
	}
	m, err := newMetrics(opts.Registerer, cfg.MaxDomainLabels)
	if err != nil {
		return nil, fmt.Errorf("purgatory: register metrics: %w", err)
	}
	p.m = m
	p.queue = newSyncQueue(cfg.backoff)
	p.sc = opts.SyncContext
	p.enabled = cfg.GitDir != "" || p.sc != nil
	if p.sc == nil {
		p.sc = &gitContext{p: p}
	}
	p.th = throttle.New(throttle.Options{Clock: p.clock, Concurrency: cfg.DomainConcurrency,
		PerWindow: cfg.DomainRequestsPerWindow, Window: cfg.DomainWindow, Spawn: p.spawn,
		Work: func(domain, id string, tried map[string]bool, l *throttle.Lease) (string, bool, bool) {
			return p.sync.workQueued(p.ctx(), domain, id, tried, l)
		},
		Left: p.leftDomain,
		InFlight: func(domain string, n int) {
			m.domainInFlight.WithLabelValues(m.domain(domain)).Add(float64(n))
		},
		Waiting: func(domain string, n int) {
			m.domainWaiting.WithLabelValues(m.domain(domain)).Add(float64(n))
		}})
	p.sync = &syncer{sc: p.sc, th: p.th, m: m, log: p.log, note: p.noteError, wait: p.waitFor, tally: &p.tally,
		fails: newFailLog(p.log, p.clock, cfg.FailureLogInterval)}
	return p, nil
}

// Needs reports whether ev must go through purgatory before it is published:
// kinds 30618, 1618 and 1619 when a git directory is configured.
func (p *Purgatory) Needs(ev *nostr.Event) bool {
	if !p.enabled {
		return false
	}
	switch ev.Kind {
	case KindState, KindPR, KindPRUpdate:
		return true
	}
	return false
}

// AddAnnouncement records an accepted 30617 announcement (newest per
// pubkey and d): its clone URLs are fetch sources, its maintainers widen
// authorisation, and its owner's repository is a release target. Held events
// of that identifier are scheduled again.
func (p *Purgatory) AddAnnouncement(ev *nostr.Event) {
	if ev == nil || ev.Kind != KindAnnouncement || !gitx.ValidPubKey(ev.PubKey) {
		return
	}
	if p.Hosts(ev) {
		p.screen(ev)
	}
	d := ev.Tags.GetD()
	if gitx.ValidateIdentifier(d) != nil {
		return
	}
	a := &announcement{pubkey: ev.PubKey, createdAt: ev.CreatedAt, id: ev.ID, hosted: p.Hosts(ev)}
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "clone" {
			a.clone = append(a.clone, tag[1:]...)
		}
	}
	a.maintainers = nip34.Maintainers(ev)
	if len(a.clone) > p.cfg.MaxCloneURLs {
		a.clone = a.clone[:p.cfg.MaxCloneURLs]
	}
	now := p.clock.Now()
	p.mu.Lock()
	byOwner := p.anns[d]
	old := byOwner[ev.PubKey]
	switch {
	case old != nil && !(stamp{a.createdAt, a.id}).newer(stamp{old.createdAt, old.id}):
		p.mu.Unlock()
		return
	case old == nil && p.nAnns >= p.cfg.MaxAnnouncements:
		p.mu.Unlock()
		p.log.Warn("announcement limit reached", zap.Int("max_announcements", p.cfg.MaxAnnouncements))
		return
	}
	if byOwner == nil {
		byOwner = map[string]*announcement{}
		p.anns[d] = byOwner
	}
	if old == nil {
		p.nAnns++
	}
	byOwner[ev.PubKey] = a
	pending := a.hosted && p.pendingLocked(d)
	if pending {
		p.queue.add(d, p.cfg.SyncedDelay, now)
		p.m.queueSize.Set(float64(p.queue.len()))
	}
	p.mu.Unlock()
	if a.hosted { // its clone domains' series exist from now on
		for _, u := range a.clone {
			if cu, err := gitx.ParseCloneURL(u); err == nil && cu.Domain != p.own {
				p.m.domain(cu.Domain)
			}
		}
	}
	if pending {
		p.nudge()
	}
}

// Hosts applies GRASP-01 to an accepted announcement: it is hosted when it
// lists OwnDomain in both `clone` and `relays`, or when HostAll is set or
// no OwnDomain is configured (the own relay's acceptance is then the only
// rule).
func (p *Purgatory) Hosts(ann *nostr.Event) bool {
	return nip34.Hosted(ann, p.cfg.OwnDomain, p.cfg.HostAll)
}

// Add takes a state event, PR or PR update into purgatory. Only events of
// hosted repositories are held (ErrNotHosted otherwise): a state whose
// identifier has a hosted announcement that lets its author push, a PR
// tagging any hosted repository (AddAnnouncement tells which are). onOwnRelay says
// the event was seen on the own relay (it will not be published again, and
// its sync waits OwnRelayDelay for the author's push); otherwise it came from
// a remote relay and is published on release. Adding an event already held
// only updates onOwnRelay.
func (p *Purgatory) Add(ev *nostr.Event, onOwnRelay bool) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	}
	if !p.Needs(ev) {
		if !p.enabled {
			return ErrDisabled
		}
		return fmt.Errorf("%w: kind %d", ErrNotHeld, ev.Kind)
	}
	e, err := parseEntry(ev, p.cfg.MaxCloneURLs)
	if err != nil {
		return err
	}
	now := p.clock.Now()
	e.onOwnRelay = onOwnRelay
	e.added = now
	delay := p.cfg.SyncedDelay
	if onOwnRelay {
		delay = p.cfg.OwnRelayDelay
	}

	p.mu.Lock()
	if held, ok := p.byID[ev.ID]; ok {
		held.onOwnRelay = held.onOwnRelay || onOwnRelay
		p.mu.Unlock()
		return nil
	}
	if !p.hostedLocked(e) {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s of %q", ErrNotHosted, kindLabel(ev.Kind), e.identifier)
	}
	if ev.Kind == KindState {
		key := ev.PubKey + "/" + e.identifier
		st := stamp{ev.CreatedAt, ev.ID}
		if l, ok := p.latest[key]; ok && !st.newer(l) {
			p.mu.Unlock()
			return ErrStale
		}
		if old := p.states[e.identifier][ev.PubKey]; old != nil {
			if !st.newer(stamp{old.ev.CreatedAt, old.ev.ID}) {
				p.mu.Unlock()
				return ErrStale
			}
			p.removeLocked(old)
		}
		if onOwnRelay {
			// The own relay keeps the newest per author: never apply an
			// older state of this author over it.
			p.setLatestLocked(key, st)
		}
	}
	if len(p.byID) >= p.cfg.MaxEntries {
		p.mu.Unlock()
		p.m.refused.WithLabelValues(kindLabel(ev.Kind)).Inc()
		p.tally.refused.Add(1)
		return ErrFull
	}
	p.insertLocked(e)
	p.queue.add(e.identifier, delay, now)
	p.m.queueSize.Set(float64(p.queue.len()))
	p.mu.Unlock()
	p.screen(ev) // only events held: a foreign repository's URLs are never looked at
	p.nudge()
	return nil
}

// Has reports whether the event id is held.
func (p *Purgatory) Has(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.byID[id]
	return ok
}

// AppendHeld adds the held events to a negentropy local set (a
// localindex.Source): we have them.
func (p *Purgatory) AppendHeld(dst []neg.Item, _ nostr.Filter) []neg.Item {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.byID {
		if e.idOK {
			dst = append(dst, neg.Item{CreatedAt: e.ev.CreatedAt, ID: e.id})
		}
	}
	return dst
}

// Held returns the held event ids with their created_at.
func (p *Purgatory) Held() []Held {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Held, 0, len(p.byID))
	for id, e := range p.byID {
		out = append(out, Held{ID: id, CreatedAt: e.ev.CreatedAt})
	}
	return out
}

// IDs returns the held event ids.
func (p *Purgatory) IDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.byID))
	for id := range p.byID {
		out = append(out, id)
	}
	return out
}

// Len returns the number of held events.
func (p *Purgatory) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byID)
}

// Stats returns a snapshot of the purgatory's size.
func (p *Purgatory) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{QueueSize: p.queue.len(), Announcements: p.nAnns}
	for _, e := range p.byID {
		if e.ev.Kind == KindState {
			s.States++
		} else {
			s.PRs++
		}
	}
	return s
}
