package discovery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/ownset"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// Settings are the engine settings discovery reads (the engine's Config
// maps onto them, field for field).
type Settings struct {
	OwnRelay      string
	ServiceDomain string
	// HostAll syncs every repository whose announcement the own relay
	// accepted (else GRASP-01 decides, when ServiceDomain is set).
	HostAll bool
	// Bootstrap23 are the bootstrap relays asked about every repository
	// (layers 2 and 3), sorted; none unless the engine asks them all.
	Bootstrap23 []string
	SelfKinds   []int
	// BatchWindow caps how long a self-subscription batch collects events;
	// BatchQuiet flushes it earlier once no event came for that long.
	BatchWindow time.Duration
	BatchQuiet  time.Duration
	// BatchMax flushes it once it holds that many events (0: no bound).
	BatchMax int
	// RootWait is how long a root the own relay stored (Deps.Unapplied)
	// may wait for a batch before it is applied from its note
	// (applyOverdue); 0 never.
	RootWait    time.Duration
	SinceBuffer time.Duration
	// QuickReconnectWindow: a self-subscription that reconnects within it
	// keeps the local set as filled; after a longer outage it is filled
	// again.
	QuickReconnectWindow time.Duration
	// ConnectTimeout bounds one dial of the own relay; OwnReconnectBase and
	// OwnReconnectMax are the redial's doubling backoff.
	ConnectTimeout           time.Duration
	OwnReconnectBase         time.Duration
	OwnReconnectMax          time.Duration
	MaxRelaysPerAnnouncement int
	MaxRepositories          int
	// Negentropy gives the catch-up's NIP-77 options and fetch batch.
	Negentropy historic.NegConfig
}

// Deps are discovery's collaborators and the engine's side of it, all
// given at construction.
type Deps struct {
	Log   *zap.Logger
	Clock clock.Clock
	// Ingest takes every event seen on the own relay.
	Ingest *ingest.Handler
	// Pager pages the own relay's history.
	Pager *historic.Pager
	// Local, when set, is the local set filled from the own relay before
	// remote relays connect (and caught up with it after a restart).
	Local *ownset.OwnLocalSet
	// DialOwn connects to the own relay with RelayOptions.
	DialOwn      func(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error)
	RelayOptions relay.Options
	// AllowRelay, when set, screens relay URLs found in announcements.
	AllowRelay func(url string) error
	// KeepHeads keeps the current announcements and states for the state
	// store.
	KeepHeads bool
	// Unapplied, when set, are the roots on the own relay not applied
	// yet, which the ingest handler notes as the own relay stores them:
	// those no batch applies within RootWait are applied from the note;
	// with a state store the saved repository index includes them.
	Unapplied *UnappliedRoots
	// LocalRestored says Local was loaded from the state store.
	LocalRestored bool

	// Post runs fn on the engine's Run goroutine (it gives up when the
	// engine stops).
	Post func(fn func())
	// Applied is called on the Run goroutine after a batch changed the
	// index, with what the batch added to each relay's target.
	Applied func(delta map[string]repoindex.Items)
	// Ready is called on the Run goroutine once the own relay's history
	// was read and the local set filled: remote relays may connect.
	Ready func()
	// ForgetConfirmed makes every remote relay sync afresh (the own relay
	// lost events while the sidecar was down); it runs on the Run
	// goroutine and waits for it.
	ForgetConfirmed func(ctx context.Context, lost int)
	// Refresh refreshes the engine's snapshots on its Run goroutine (the
	// first RepoState).
	Refresh func()
}

// Discovery is the single owner of which repositories are hosted: it
// reads the own relay (the self-subscription's paging and live events, the
// restart's catch-up) and keeps the repository index, the orphan roots,
// the heads and the unapplied roots. Its index (Repos) and the rest of its
// plain fields are owned by the engine's Run goroutine: every batch is
// posted there (Deps.Post) and applied by ApplyBatch. Its own goroutines
// (the self-subscriber, the fill and the catch-up) touch only the atomics
// and the mutex-guarded fields.
type Discovery struct {
	cfg   Settings
	deps  Deps
	log   *zap.Logger
	clock clock.Clock
	h     *ingest.Handler
	pager *historic.Pager
	local *ownset.OwnLocalSet
	wg    sync.WaitGroup

	// Owned by the Run goroutine.

	// Repos is the repository index: what we want from the network.
	Repos repoindex.RepoSyncIndex
	// orphans holds root events seen on the own relay before their
	// repository's announcement (the self-subscription streams newest
	// first, so a batch can end between a root and its announcement),
	// by repository reference; attached when the announcement arrives.
	orphans     map[string]repoindex.Set
	orphanCount int
	// reposGen counts changes of Repos and orphans.
	reposGen uint64
	// heads are the current announcements and states (Deps.KeepHeads),
	// kept as JSON by address (headKey); headsGen counts their changes;
	// restoredHeads are the previous run's (sharing their JSON).
	heads         map[string]head
	headsGen      uint64
	restoredHeads []Head
	// restoredKnown are the ids of the restored heads, until the restart's
	// paging compared them with the restored local index.
	restoredKnown map[event.ID]struct{}
	// catchUpTried: the restored local index was reconciled (or tried).
	catchUpTried bool
	// earlyCatchUp is the outcome of the catch-up started with Run
	// (startEarlyCatchUp), until the initial fill takes it.
	earlyCatchUp <-chan bool

	// Shared with discovery's goroutines.

	ready atomic.Bool // history read and the local set filled
	ownUp atomic.Bool // the self-subscription's connection is up
	// catchUpDone is closed when the early catch-up ended, catchUpOK its
	// outcome; caught are the self-kind events it fetched (caughtMu).
	catchUpDone chan struct{}
	catchUpOK   atomic.Bool
	caughtMu    sync.Mutex
	caught      []*nostr.Event
	// caughtIDs are the self-kind events the catch-up fetched and handed
	// on (written before catchUpDone is closed).
	caughtIDs map[event.ID]struct{}
	// unapplied are roots on the own relay whose batch may not be applied
	// yet (Deps.Unapplied).
	unapplied *UnappliedRoots
	// restoredSelfSeen is how far the previous run had read the own
	// relay's history; selfSeen is this run's (unix nanoseconds).
	restoredSelfSeen time.Time
	selfSeen         atomic.Int64
	selfLive         atomic.Bool // history read and the self-subscription live
	// historyBatches are the self history's batches posted to the Run
	// goroutine and not applied yet: the saved cursor does not pass them.
	historyBatches atomic.Int64
	// snapMu guards reposSnap, the last persistable copy of the index.
	snapMu    sync.Mutex
	reposSnap PersistedRepos
	// reposWanted is set once RepoState was asked (a state store): only
	// then does PublishRepos copy the repository index.
	reposWanted atomic.Bool
}

// New builds discovery; the engine calls Start from its Run goroutine.
func New(cfg Settings, deps Deps) (*Discovery, error) {
	if deps.Post == nil || deps.Applied == nil || deps.Ready == nil || deps.ForgetConfirmed == nil || deps.Refresh == nil {
		return nil, errors.New("discovery: Post, Applied, Ready, ForgetConfirmed and Refresh are required")
	}
	if deps.Log == nil {
		deps.Log = zap.NewNop()
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	d := &Discovery{
		cfg: cfg, deps: deps, log: deps.Log, clock: deps.Clock, h: deps.Ingest,
		pager: deps.Pager, local: deps.Local,
		Repos:     repoindex.RepoSyncIndex{},
		orphans:   map[string]repoindex.Set{},
		unapplied: deps.Unapplied,
	}
	return d, nil
}

// Start runs the self-subscriber until ctx is done, after starting the
// catch-up of a restored local index (startEarlyCatchUp). Run goroutine.
func (d *Discovery) Start(ctx context.Context) {
	d.startEarlyCatchUp(ctx)
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.runSelfSubscriber(ctx) }()
}

// Wait waits for discovery's goroutines after ctx ended.
func (d *Discovery) Wait() { d.wg.Wait() }

// Ready tells whether the own relay's history was read and the local set
// filled (remote relays connect only then).
func (d *Discovery) Ready() bool { return d.ready.Load() }

// OwnUp tells whether the self-subscription's connection is up.
func (d *Discovery) OwnUp() bool { return d.ownUp.Load() }

// ReposGen counts the changes of the repository index and its orphans.
// Run goroutine.
func (d *Discovery) ReposGen() uint64 { return d.reposGen }

// NoteFetched is told of every event the catch-up fetched: those of the
// self-subscription's kinds are applied as its paging would have
// (caughtUpSelf). Any goroutine.
func (d *Discovery) NoteFetched(ev *nostr.Event) {
	if slices.Contains(d.cfg.SelfKinds, ev.Kind) {
		d.caughtMu.Lock()
		d.caught = append(d.caught, ev)
		d.caughtMu.Unlock()
	}
}

// sleep waits dur or until ctx is done.
func (d *Discovery) sleep(ctx context.Context, dur time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.clock.After(dur):
		return nil
	}
}
